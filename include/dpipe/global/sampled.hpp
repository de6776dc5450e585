#pragma once
/// \file
/// Sampled<T>: an element of a global-order pipeline with the place it came from (its step, its
/// source index and its per-sample seed), and SampleRandom, the random engine a `map_random`
/// callable gets for each element.

#include <cstdint>
#include <limits>

#include <dpipe/random/philox.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe {

/// An element of a global-order pipeline between its sampler and its end. The pipeline's map,
/// filter and flatmap keep `step`, `index` and `seed` of the source element an output came from.
template <class T>
struct Sampled {
  std::uint64_t step = 0;   ///< the global step the source position belongs to
  std::uint64_t index = 0;  ///< the source index
  std::uint64_t seed = 0;   ///< sample_seed(epoch key, index)
  T value{};
  DPIPE_FIELDS(step, index, seed, value)
};

/// The seed of source index `index` in the epoch keyed `key`: a function of the two alone, so a
/// filter upstream or the job's shape does not change it.
[[nodiscard]] constexpr std::uint64_t sample_seed(std::uint64_t key, std::uint64_t index) noexcept {
  // SplitMix64's finalizer over the key and the index, kept apart by an odd multiplier.
  std::uint64_t z = key ^ (index * 0x9E3779B97F4A7C15ULL + 0xD1B54A32D192ED03ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// A uniform random bit generator (for <random>'s distributions) seeded by one element's seed:
/// the same draws for the same (loader seed, epoch, source index) whatever the worker count,
/// world size or filters. Thread-safety: none; one per element.
class SampleRandom {
 public:
  using result_type = std::uint64_t;
  explicit SampleRandom(std::uint64_t seed) : engine_(seed) {}
  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }
  result_type operator()() { return engine_.generate(); }

 private:
  PhiloxEngine engine_;
};

}  // namespace dpipe

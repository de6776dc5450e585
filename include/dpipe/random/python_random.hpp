#pragma once
/// \file
/// PythonRandom: CPython's random.Random (MT19937 seeded by init_by_array on the seed's 32-bit
/// words, getrandbits, _randbelow by rejection, sample), so that shuffles match torchdata's for the
/// same seed. std::mt19937 with std::seed_seq is not equivalent.

#include <array>
#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

#include <dpipe/serialization/serializer.hpp>

namespace dpipe {

/// Thread-safety: none; copies are independent.
class PythonRandom {
 public:
  /// Seeded with 0 until seed() is called.
  PythonRandom() { seed(0); }
  explicit PythonRandom(std::uint64_t seed) { this->seed(seed); }

  /// random.seed(seed) for a non-negative integer seed.
  void seed(std::uint64_t seed);
  /// The next 32-bit output of MT19937.
  std::uint32_t next_uint32() {
    if (index_ >= kStateSize) twist();  // also catches a corrupted restored index
    std::uint32_t y = state_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= y >> 18;
    return y;
  }
  /// random.getrandbits(bits), for bits <= 64.
  std::uint64_t getrandbits(unsigned bits) {
    if (bits <= 32) return bits == 0 ? 0 : next_uint32() >> (32 - bits);
    return wide_bits(bits);
  }
  /// random._randbelow(n): uniform in [0, n). REQUIRES: n > 0.
  std::uint64_t randbelow(std::uint64_t n) {
    if (n == 0) throw_empty_randbelow();
    const auto bits = static_cast<unsigned>(std::bit_width(n));
    std::uint64_t r = getrandbits(bits);
    while (r >= n) r = getrandbits(bits);
    return r;
  }
  /// random.randint(low, high): uniform in [low, high]. REQUIRES: low <= high.
  std::int64_t randint(std::int64_t low, std::int64_t high) {
    if (low > high) throw_empty_randint(low, high);
    const auto width = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low) + 1;
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + randbelow(width));
  }

  /// random.random(): uniform in [0, 1) with 53 random bits.
  double random();
  /// random.choices(range(len(weights)), weights)[0]: an index drawn with the given relative
  /// weights (cumulated left to right, bisected as CPython does). REQUIRES: a positive finite total.
  std::size_t choose_index(const std::vector<double>& weights);

  /// random.sample(population, k): k distinct elements in CPython's selection order.
  /// REQUIRES: k <= population.size().
  template <class T>
  std::vector<T> sample(const std::vector<T>& population, std::size_t k);
  /// The positions random.sample(range(n), k) picks, in its selection order (sample() without the
  /// copies, for move-only elements). REQUIRES: k <= n.
  std::vector<std::size_t> sample_indices(std::size_t n, std::size_t k);

  friend bool operator==(const PythonRandom&, const PythonRandom&) = default;

  DPIPE_FIELDS(state_, index_)

 private:
  static constexpr std::size_t kStateSize = 624;

  /// Regenerates the 624 words of state (MT19937's twist).
  void twist();
  /// getrandbits for 33 .. 64 bits.
  std::uint64_t wide_bits(unsigned bits);
  [[noreturn]] static void throw_empty_randbelow();
  [[noreturn]] static void throw_empty_randint(std::int64_t low, std::int64_t high);

  std::array<std::uint32_t, kStateSize> state_{};
  std::uint32_t index_ = kStateSize;
};

template <class T>
std::vector<T> PythonRandom::sample(const std::vector<T>& population, std::size_t k) {
  std::vector<T> result;
  result.reserve(k);
  for (const std::size_t i : sample_indices(population.size(), k)) result.push_back(population[i]);
  return result;
}

}  // namespace dpipe

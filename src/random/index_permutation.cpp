// IndexPermutation: the network's width and round count for n, and the round keys for a key.

#include <algorithm>
#include <bit>

#include <dpipe/random/index_permutation.hpp>
#include <dpipe/random/philox.hpp>

namespace dpipe {
namespace {

/// h for n: the smallest with 2h >= the bits of n - 1 and h >= 1, so that 2^(2h) < 4n for n > 1.
unsigned half_bits_for(std::uint64_t n) noexcept {
  const auto bits = static_cast<unsigned>(n > 1 ? std::bit_width(n - 1) : 0);
  return std::max(1U, (bits + 1) / 2);
}

/// The rounds for halves of `half_bits` bits: kRounds, and more for small networks. A round mixes
/// only h bits: on 2-bit halves even ideal (random) round functions leave a measurable pair bias
/// after 8 rounds (perm(p + 1) - perm(p) over 200000 keys), so the rounds grow until rounds * h
/// >= 24: 24 rounds for h = 1, 12 for h = 2, 8 for h = 3.
constexpr unsigned rounds_for(unsigned half_bits) noexcept {
  constexpr unsigned kMixedBits = 24;
  return std::max(IndexPermutation::kRounds, (kMixedBits + half_bits - 1) / half_bits);
}

}  // namespace

IndexPermutation::IndexPermutation(std::uint64_t n, std::uint64_t key)
    : size_(n),
      key_(key),
      half_bits_(half_bits_for(n)),
      rounds_(rounds_for(half_bits_)),
      half_mask_((std::uint64_t{1} << half_bits_) - 1) {
  static_assert(rounds_for(1) <= kMaxRounds, "the most rounds, those of h = 1, fit in round_keys_");
  // Philox streams of different keys are unrelated; a SplitMix64 sequence started at `key` would
  // give key + 0x9e3779b97f4a7c15 the round keys of `key` shifted by one round.
  PhiloxEngine engine(key);
  for (unsigned round = 0; round < rounds_; ++round) {
    const std::uint64_t word = engine.generate();
    round_keys_[round] = {static_cast<std::uint32_t>(word), static_cast<std::uint32_t>(word >> 32) | 1U};
  }
}

}  // namespace dpipe

// IndexPermutation: the network's radices and round count for n, and the round keys for a key.

#include <algorithm>
#include <bit>

#include <dpipe/random/index_permutation.hpp>
#include <dpipe/random/philox.hpp>

namespace dpipe {
namespace {

/// k for n: half the bits of n - 1, rounded down, and at least 1. Then b = 2^k and a = ceil(n / b)
/// satisfy a <= 2b (and b / 2 < a for n > 2), a <= 2^32, a * b <= 2^64 (a value never overflows)
/// and a * b - n < b.
unsigned right_bits_for(std::uint64_t n) noexcept {
  const auto bits = static_cast<unsigned>(n > 1 ? std::bit_width(n - 1) : 0);
  return std::max(1U, bits / 2);
}

/// The rounds for b = 2^k: kRounds, and more for small networks. A round mixes only about k bits:
/// on 2-bit halves even ideal (random) round functions leave a measurable pair bias after 8 rounds
/// (perm(p + 1) - perm(p) over 200000 keys), so the rounds grow until rounds * k >= 24: 24 rounds
/// for k = 1 (n <= 8), 12 for k = 2 (n <= 32), 8 for k = 3 (n <= 128).
constexpr unsigned rounds_for(unsigned right_bits) noexcept {
  constexpr unsigned kMixedBits = 24;
  return std::max(IndexPermutation::kRounds, (kMixedBits + right_bits - 1) / right_bits);
}

/// Whether every k gives an even count: the rounds come in pairs, one of each kind.
constexpr bool rounds_are_even() noexcept {
  for (unsigned right_bits = 1; right_bits <= 32; ++right_bits) {
    if (rounds_for(right_bits) % 2 != 0) return false;
  }
  return true;
}

}  // namespace

IndexPermutation::IndexPermutation(std::uint64_t n, std::uint64_t key)
    : size_(n),
      key_(key),
      right_bits_(right_bits_for(n)),
      rounds_(rounds_for(right_bits_)),
      right_mask_((std::uint64_t{1} << right_bits_) - 1),
      left_size_(n > 0 ? ((n - 1) >> right_bits_) + 1 : 1) {
  static_assert(rounds_for(1) <= kMaxRounds, "the most rounds, those of k = 1, fit in round_keys_");
  static_assert(rounds_are_even(), "round_pair runs the rounds two at a time");
  // Philox streams of different keys are unrelated; a SplitMix64 sequence started at `key` would
  // give key + 0x9e3779b97f4a7c15 the round keys of `key` shifted by one round.
  PhiloxEngine engine(key);
  for (unsigned round = 0; round < rounds_; ++round) {
    const std::uint64_t word = engine.generate();
    round_keys_[round] = {static_cast<std::uint32_t>(word), static_cast<std::uint32_t>(word >> 32) | 1U};
  }
}

}  // namespace dpipe

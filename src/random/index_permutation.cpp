// IndexPermutation: the network's radices and round count for n, and the round keys for a key.

#include <algorithm>
#include <bit>
#include <cassert>

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

// Compiled once per instruction set, the best one picked when the library loads (an ifunc): the
// round loops are vector code there, 8 values per instruction under AVX-512.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
[[gnu::target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")]]
#endif
bool IndexPermutation::encrypt_lanes(std::uint64_t first, std::size_t count, std::uint64_t* out) const noexcept {
  std::array<std::uint64_t, kLanes> left;   // NOLINT(cppcoreguidelines-pro-type-member-init): lanes < count are set
  std::array<std::uint64_t, kLanes> right;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  const unsigned right_bits = right_bits_;
  const std::uint64_t right_mask = right_mask_;
  const std::uint64_t left_size = left_size_;
  for (std::size_t lane = 0; lane < count; ++lane) {
    left[lane] = (first + lane) >> right_bits;
    right[lane] = (first + lane) & right_mask;
  }
  for (unsigned round = 0; round < rounds_; round += 2) {
    // round_pair(), written with a select in place of the borrow so that the lane loop vectorizes
    const RoundKey add_key = round_keys_[round];
    const RoundKey xor_key = round_keys_[round + 1];
    for (std::size_t lane = 0; lane < count; ++lane) {
      // the 32-bit product as the low half of a 64-bit one: the lanes stay 64 bits wide
      const std::uint64_t hash =
          (std::uint64_t{static_cast<std::uint32_t>(right[lane]) ^ add_key.offset} * add_key.multiplier) & 0xffffffffU;
      const std::uint64_t sum = left[lane] + ((hash * left_size) >> 32);
      const std::uint64_t reduced = sum >= left_size ? sum - left_size : sum;
      left[lane] = reduced;
      const std::uint64_t product =
          std::uint64_t{static_cast<std::uint32_t>(reduced) ^ xor_key.offset} * xor_key.multiplier;
      right[lane] = (right[lane] ^ product ^ (product >> 32)) & right_mask;
    }
  }
  bool walks = false;
  for (std::size_t lane = 0; lane < count; ++lane) {
    out[lane] = (left[lane] << right_bits) | right[lane];
    walks |= out[lane] >= size_;
  }
  return walks;
}

void IndexPermutation::indices(std::uint64_t first, std::size_t count, std::uint64_t* out) const noexcept {
  assert(first <= size_ && count <= size_ - first && "IndexPermutation::indices: positions out of range");
  while (count > 0) {
    const std::size_t lanes = std::min(count, kLanes);
    if (encrypt_lanes(first, lanes, out)) {
      for (std::size_t lane = 0; lane < lanes; ++lane) {
        while (out[lane] >= size_) out[lane] = encrypt(out[lane]);  // the rare cycle walks, as operator() does
      }
    }
    out += lanes;
    first += lanes;
    count -= lanes;
  }
}

}  // namespace dpipe

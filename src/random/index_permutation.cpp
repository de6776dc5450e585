// IndexPermutation: the network's radices and round count for n, and the round keys for a key.

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cassert>

#include <dpipe/random/index_permutation.hpp>
#include <dpipe/random/philox.hpp>

#include "random/vector_code.hpp"

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

namespace {

/// encrypt_lanes() for the instruction set of the function it is inlined into: the rounds
/// outside and the lanes inside, so that each round is one loop the compiler vectorizes.
template <class RoundKey>
[[gnu::always_inline]] inline bool encrypt_block(const RoundKey* keys, unsigned rounds, unsigned right_bits,
                                                 std::uint64_t left_size, std::uint64_t size, std::uint64_t first,
                                                 std::size_t count, std::uint64_t* out) noexcept {
  constexpr std::size_t kLanes = 64;
  std::array<std::uint64_t, kLanes> left;   // NOLINT(cppcoreguidelines-pro-type-member-init): lanes < count are set
  std::array<std::uint64_t, kLanes> right;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  const std::uint64_t right_mask = (std::uint64_t{1} << right_bits) - 1;
  for (std::size_t lane = 0; lane < count; ++lane) {
    left[lane] = (first + lane) >> right_bits;
    right[lane] = (first + lane) & right_mask;
  }
  for (unsigned round = 0; round < rounds; round += 2) {
    // round_pair(), written with a select in place of the borrow so that the lane loop vectorizes
    const RoundKey add_key = keys[round];
    const RoundKey xor_key = keys[round + 1];
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
    walks |= out[lane] >= size;
  }
  return walks;
}

template <class RoundKey>
bool encrypt_block_baseline(const RoundKey* keys, unsigned rounds, unsigned right_bits, std::uint64_t left_size,
                            std::uint64_t size, std::uint64_t first, std::size_t count, std::uint64_t* out) noexcept {
  return encrypt_block(keys, rounds, right_bits, left_size, size, first, count, out);
}

// The same compiled for AVX2 and for AVX-512, picked by what the CPU has at the first call (not an
// ifunc: a resolver runs before a sanitizer's runtime is up).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DPIPE_PERMUTATION_VECTOR_CLONES 1
template <class RoundKey>
[[gnu::target("avx2")]] bool encrypt_block_avx2(const RoundKey* keys, unsigned rounds, unsigned right_bits,
                                                std::uint64_t left_size, std::uint64_t size, std::uint64_t first,
                                                std::size_t count, std::uint64_t* out) noexcept {
  return encrypt_block(keys, rounds, right_bits, left_size, size, first, count, out);
}
template <class RoundKey>
[[gnu::target("avx512f,avx512dq,avx512vl,avx512bw")]] bool encrypt_block_avx512(
    const RoundKey* keys, unsigned rounds, unsigned right_bits, std::uint64_t left_size, std::uint64_t size,
    std::uint64_t first, std::size_t count, std::uint64_t* out) noexcept {
  return encrypt_block(keys, rounds, right_bits, left_size, size, first, count, out);
}
#endif

/// The vector code set_vector_code() picked, or kBest: the CPU's best, picked at the first call.
/// Constant-initialized: no guard, nothing a fork could catch half-done.
std::atomic<VectorCode> wanted_code{VectorCode::kBest};

/// The code for `code` on this CPU; kBaseline where it lacks the instructions.
VectorCode available(VectorCode code) noexcept {
#ifdef DPIPE_PERMUTATION_VECTOR_CLONES
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  const bool avx2 = __builtin_cpu_supports("avx2");
  if ((code == VectorCode::kBest || code == VectorCode::kAvx512) && avx512) return VectorCode::kAvx512;
  if ((code == VectorCode::kBest || code == VectorCode::kAvx2 || code == VectorCode::kAvx512) && avx2) {
    return VectorCode::kAvx2;
  }
#else
  (void)code;
#endif
  return VectorCode::kBaseline;
}

}  // namespace

VectorCode set_vector_code(VectorCode code) noexcept {
  const VectorCode used = available(code);
  wanted_code.store(used, std::memory_order_relaxed);
  return used;
}

bool IndexPermutation::encrypt_lanes(std::uint64_t first, std::size_t count, std::uint64_t* out) const noexcept {
  static_assert(kLanes == 64, "encrypt_block's arrays hold kLanes lanes");
  VectorCode code = wanted_code.load(std::memory_order_relaxed);
  if (code == VectorCode::kBest) code = set_vector_code(VectorCode::kBest);
  const auto run = [&](auto block) {
    return block(round_keys_.data(), rounds_, right_bits_, left_size_, size_, first, count, out);
  };
#ifdef DPIPE_PERMUTATION_VECTOR_CLONES
  if (code == VectorCode::kAvx512) return run(encrypt_block_avx512<RoundKey>);
  if (code == VectorCode::kAvx2) return run(encrypt_block_avx2<RoundKey>);
#endif
  return run(encrypt_block_baseline<RoundKey>);
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

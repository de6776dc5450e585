#pragma once
/// \file
/// IndexPermutation: a keyed bijection of [0, n) evaluated one position at a time, for a global
/// shuffle of an indexed dataset without a table of n indices (the idea of tf.random_index_shuffle
/// and grain's index shuffle). A Feistel network with alternating radices (as in the
/// format-preserving ciphers FF1 and FF3) on Z_a x Z_b, b = 2^k and a = ceil(n / b) both about
/// sqrt(n), with cycle walking back into [0, n) for the fewer than b values of [n, a * b).

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>

namespace dpipe {

/// A permutation of [0, n) keyed by a 64-bit key: position -> index, computed per position in O(1)
/// with no table. Thread-safety: const members may be called concurrently; copies are independent.
///
/// The same (n, key) gives the same permutation in every process and on every run: a shuffle
/// order is part of what a checkpoint resumes, so the mapping is pinned by known-answer tests.
class IndexPermutation {
 public:
  /// The permutation of [0, n) selected by `key`; n == 0 is the empty range. Derives the round
  /// keys (a PhiloxEngine stream seeded with `key`) once, here.
  IndexPermutation(std::uint64_t n, std::uint64_t key);

  /// The index at `position`. REQUIRES: position < size(), checked by a debug assert only (out of
  /// range, the walk need not end). Averaged over the positions it evaluates the network
  /// a * b / n < 1 + 2 / sqrt(n) times: walks are rare, so their branch is predicted.
  [[nodiscard]] std::uint64_t operator()(std::uint64_t position) const noexcept {
    assert(position < size_ && "IndexPermutation: position out of range");
    std::uint64_t value = position;
    do {  // cycle walking: the cycle through `position` returns to [0, n) at the latest at position
      value = encrypt(value);
    } while (value >= size_);
    return value;
  }

  /// Writes the indices at positions `first` .. `first + count - 1` to out[0 .. count): the values
  /// operator() gives, computed many positions at a time with the vector units (AVX-512 or AVX2
  /// where the CPU has them, chosen at the first call), 2-3 ns per index. REQUIRES: first + count <=
  /// size(), checked by a debug assert only.
  void indices(std::uint64_t first, std::size_t count, std::uint64_t* out) const noexcept;

  /// n.
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// The key the permutation was made with.
  [[nodiscard]] std::uint64_t key() const noexcept { return key_; }

  /// The rounds of every network; those of n <= 128 (b <= 8) add more (see the constructor).
  static constexpr unsigned kRounds = 6;

 private:
  /// The positions indices() runs through the network together.
  static constexpr std::size_t kLanes = 64;

  /// The most rounds any network uses (those of b = 2, n <= 8).
  static constexpr unsigned kMaxRounds = 24;

  /// One round's key (see round_pair).
  struct RoundKey {
    std::uint32_t offset;
    std::uint32_t multiplier;  // odd
  };

  /// The network: a bijection of [0, a * b), the value left * b + right with left in Z_a and right
  /// in Z_b. The first kRounds have a constant count, so that the compiler unrolls them: the extra
  /// rounds of small domains come after.
  [[nodiscard]] std::uint64_t encrypt(std::uint64_t value) const noexcept {
    std::uint64_t left = value >> right_bits_;
    std::uint64_t right = value & right_mask_;
    for (unsigned round = 0; round < kRounds; round += 2) round_pair(left, right, round);
    for (unsigned round = kRounds; round < rounds_; round += 2) round_pair(left, right, round);
    return (left << right_bits_) | right;
  }

  /// Rounds `round` and `round + 1`, each a bijection of Z_a x Z_b:
  /// - left -> (left + f(right)) mod a, f the high bits of the 32-bit (right ^ offset) * multiplier
  ///   (a multiplicative hash) scaled into [0, a) by a multiply-high, so that f reaches all of Z_a
  ///   (masked to the largest power of two <= a, missing up to half of Z_a, it leaves a position
  ///   bias: z > 200 in a 16 x 16 binned chi-square over 400000 keys at n = 50000);
  /// - right -> right ^ g(left), g the xor of the two 32-bit halves of (left ^ offset) * multiplier
  ///   (Philox's mulhilo, folded), cut to k bits.
  void round_pair(std::uint64_t& left, std::uint64_t& right, unsigned round) const noexcept {
    const RoundKey add_key = round_keys_[round];
    const std::uint32_t hash = (static_cast<std::uint32_t>(right) ^ add_key.offset) * add_key.multiplier;
    left = reduce_once(left + ((std::uint64_t{hash} * left_size_) >> 32), left_size_);
    const RoundKey xor_key = round_keys_[round + 1];
    const std::uint64_t product = std::uint64_t{static_cast<std::uint32_t>(left) ^ xor_key.offset} * xor_key.multiplier;
    right = (right ^ product ^ (product >> 32)) & right_mask_;
  }

  /// Writes encrypt(first + lane) to out[lane] for each lane < count <= kLanes, in vector code
  /// for the CPU's instruction set (picked at the first call). Returns whether a value is >= n
  /// (it must walk on).
  bool encrypt_lanes(std::uint64_t first, std::size_t count, std::uint64_t* out) const noexcept;

  /// sum mod modulus for sum < 2 * modulus, branch-free: the subtraction's borrow picks the result.
  [[nodiscard]] static std::uint64_t reduce_once(std::uint64_t sum, std::uint64_t modulus) noexcept {
    std::uint64_t difference = 0;
    return __builtin_sub_overflow(sum, modulus, &difference) ? sum : difference;
  }

  std::uint64_t size_;
  std::uint64_t key_;
  unsigned right_bits_;       // k: b = 2^k, 1 <= k <= 32
  unsigned rounds_;           // kRounds, or more for small networks; even
  std::uint64_t right_mask_;  // b - 1
  std::uint64_t left_size_;   // a = ceil(n / b), 1 <= a <= 2^32
  std::array<RoundKey, kMaxRounds> round_keys_{};
};

}  // namespace dpipe

#pragma once
/// \file
/// IndexPermutation: a keyed bijection of [0, n) evaluated one position at a time, for a global
/// shuffle of an indexed dataset without a table of n indices (the idea of tf.random_index_shuffle
/// and grain's index shuffle). A balanced Feistel network on the smallest even number of bits that
/// covers n, with cycle walking back into [0, n).

#include <array>
#include <cassert>
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
  /// range, the walk need not end). Averaged over the positions it evaluates the network m / n
  /// times, m the network's size (the smallest power of 4 >= n): fewer than 4 for n > 1.
  [[nodiscard]] std::uint64_t operator()(std::uint64_t position) const noexcept {
    assert(position < size_ && "IndexPermutation: position out of range");
    std::uint64_t value = position;
    do {  // cycle walking: the cycle through `position` returns to [0, n) at the latest at position
      value = encrypt(value);
    } while (value >= size_);
    return value;
  }

  /// n.
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// The key the permutation was made with.
  [[nodiscard]] std::uint64_t key() const noexcept { return key_; }

  /// The rounds of every network; networks of fewer than 2^8 elements add more (see the constructor).
  static constexpr unsigned kRounds = 6;

 private:
  /// The most rounds any network uses (the 4-element one of n <= 4).
  static constexpr unsigned kMaxRounds = 24;

  /// One round's key (see feistel_round).
  struct RoundKey {
    std::uint32_t offset;
    std::uint32_t multiplier;  // odd
  };

  /// The Feistel network: a bijection of [0, 2^(2 half_bits_)). The first kRounds have a constant
  /// count, so that the compiler unrolls them: the extra rounds of small domains come after.
  [[nodiscard]] std::uint64_t encrypt(std::uint64_t value) const noexcept {
    std::uint64_t left = value >> half_bits_;
    std::uint64_t right = value & half_mask_;
    for (unsigned round = 0; round < kRounds; ++round) feistel_round(left, right, round_keys_[round]);
    for (unsigned round = kRounds; round < rounds_; ++round) feistel_round(left, right, round_keys_[round]);
    return (left << half_bits_) | right;
  }

  /// (left, right) -> (right, left ^ f(right)), f the xor of the two 32-bit halves of
  /// (right ^ offset) * multiplier (Philox's mulhilo, folded), cut to half_bits_.
  void feistel_round(std::uint64_t& left, std::uint64_t& right, RoundKey key) const noexcept {
    const std::uint64_t product = std::uint64_t{static_cast<std::uint32_t>(right) ^ key.offset} * key.multiplier;
    const std::uint64_t mixed = (left ^ product ^ (product >> 32)) & half_mask_;
    left = right;
    right = mixed;
  }

  std::uint64_t size_;
  std::uint64_t key_;
  unsigned half_bits_;  // h: the network permutes 2h bits, 1 <= h <= 32
  unsigned rounds_;     // kRounds, or more for small networks
  std::uint64_t half_mask_;
  std::array<RoundKey, kMaxRounds> round_keys_{};
};

}  // namespace dpipe

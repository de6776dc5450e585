#pragma once
/// \file
/// DrainOrder: which positions of a buffer are still to be drained, with "remove the k-th
/// remaining position" in O(log n). This is what CPython's list.pop(k) does to the order of a
/// list, without moving any element: shuffle's final drain uses it to give torchdata's order in
/// O(n log n) instead of O(n^2).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dpipe::detail {

/// Thread-safety: none.
class DrainOrder {
 public:
  /// Positions 0 .. size-1 all remain.
  void assign(std::size_t size);

  [[nodiscard]] std::size_t remaining() const noexcept { return remaining_; }
  [[nodiscard]] bool taken(std::size_t position) const { return taken_[position]; }

  /// Removes the k-th remaining position (0-based) and returns it. REQUIRES: k < remaining().
  std::size_t take(std::size_t k);

 private:
  std::vector<std::uint32_t> tree_;  // 1-based Fenwick tree of remaining counts
  std::vector<bool> taken_;
  std::size_t remaining_ = 0;
  std::size_t top_ = 0;
};

}  // namespace dpipe::detail

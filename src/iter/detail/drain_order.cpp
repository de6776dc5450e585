// DrainOrder: a Fenwick tree of the positions that remain.

#include <bit>

#include <dpipe/iter/detail/drain_order.hpp>

namespace dpipe::detail {

void DrainOrder::assign(std::size_t size) {
  tree_.assign(size + 1, 0);
  taken_.assign(size, false);
  for (std::size_t i = 1; i <= size; ++i) {  // a Fenwick tree of ones, built in O(n)
    tree_[i] += 1;
    const std::size_t parent = i + (i & (~i + 1));
    if (parent <= size) tree_[parent] += tree_[i];
  }
  remaining_ = size;
  top_ = size == 0 ? 0 : std::bit_floor(size);
}

std::size_t DrainOrder::take(std::size_t k) {
  std::size_t position = 0;  // the largest prefix holding at most k remaining positions
  for (std::size_t step = top_; step != 0; step >>= 1) {
    const std::size_t next = position + step;
    if (next < tree_.size() && tree_[next] <= k) {
      position = next;
      k -= tree_[next];
    }
  }
  for (std::size_t i = position + 1; i < tree_.size(); i += i & (~i + 1)) --tree_[i];
  taken_[position] = true;
  --remaining_;
  return position;
}

}  // namespace dpipe::detail

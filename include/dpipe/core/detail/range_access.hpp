#pragma once
/// \file
/// RangeAccess<R>: begin/end/size/advance for a range through std::ranges when R is a std range,
/// through range-v3 otherwise. Neither library accepts all ranges: range-v3's views over 64-bit
/// integers are not std ranges (128-bit difference type), and std views with move-only iterators
/// (std::views::istream) are not range-v3 ranges.

#include <cstddef>
#include <iterator>
#include <ranges>

#include <range/v3/iterator/operations.hpp>
#include <range/v3/range/access.hpp>
#include <range/v3/range/concepts.hpp>
#include <range/v3/range/primitives.hpp>

namespace dpipe::detail {

template <class R, bool = std::ranges::input_range<R>>
struct RangeAccess;

/// std ranges.
template <class R>
struct RangeAccess<R, true> {
  using iterator = std::ranges::iterator_t<R>;
  static constexpr bool kForward = std::ranges::forward_range<R>;
  static constexpr bool kSized = std::ranges::sized_range<R>;
  static constexpr bool kRandomAccess = std::ranges::random_access_range<R>;
  /// Whether distance(it, end) is one subtraction, not a walk to the end (an endless or
  /// take_while range is random-access but has no such end).
  static constexpr bool kSizedSentinel = std::sized_sentinel_for<std::ranges::sentinel_t<R>, iterator>;
  static iterator begin(R& range) { return std::ranges::begin(range); }
  static auto end(R& range) { return std::ranges::end(range); }
  static std::size_t size(R& range) { return static_cast<std::size_t>(std::ranges::size(range)); }
  template <class S>
  static std::size_t distance(const iterator& first, const S& last) {
    return static_cast<std::size_t>(std::ranges::distance(first, last));
  }
  static void advance(iterator& it, std::size_t count) {
    std::ranges::advance(it, static_cast<std::iter_difference_t<iterator>>(count));
  }
};

/// range-v3 ranges that are not std ranges.
template <class R>
struct RangeAccess<R, false> {
  using iterator = ranges::iterator_t<R>;
  static constexpr bool kForward = ranges::forward_range<R>;
  static constexpr bool kSized = ranges::sized_range<R>;
  static constexpr bool kRandomAccess = ranges::random_access_range<R>;
  static constexpr bool kSizedSentinel = ranges::sized_sentinel_for<ranges::sentinel_t<R>, iterator>;
  static iterator begin(R& range) { return ranges::begin(range); }
  static auto end(R& range) { return ranges::end(range); }
  static std::size_t size(R& range) { return static_cast<std::size_t>(ranges::size(range)); }
  template <class S>
  static std::size_t distance(const iterator& first, const S& last) {
    return static_cast<std::size_t>(ranges::distance(first, last));
  }
  static void advance(iterator& it, std::size_t count) {
    ranges::advance(it, static_cast<ranges::iter_difference_t<iterator>>(count));
  }
};

}  // namespace dpipe::detail

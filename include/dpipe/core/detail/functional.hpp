#pragma once
/// \file
/// Small function objects shared by nodes.

#include <cstddef>
#include <tuple>
#include <utility>

namespace dpipe::detail {

/// Returns its argument.
struct Identity {
  template <class X>
  X operator()(X&& value) const {
    return std::forward<X>(value);
  }
};

/// Returns element I of a tuple-like value.
template <std::size_t I>
struct TupleElement {
  template <class Tuple>
  auto operator()(Tuple&& value) const {
    return std::get<I>(std::forward<Tuple>(value));
  }
};

}  // namespace dpipe::detail

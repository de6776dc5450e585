#pragma once
/// \file
/// append_results: how flatmap, map_batches and their skipping forms collect what a function
/// returns.

#include <concepts>
#include <functional>
#include <iterator>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

#include <range/v3/range/concepts.hpp>

namespace dpipe::detail {

/// Appends the elements of the range `fn(arg)` to `out`. Elements of a container `fn` returns by
/// value are moved (so move-only elements work); those of a view or of a range `fn` returns by
/// reference are copied, since something else owns them. A std::vector<E> returned into an empty
/// `out` is taken over whole.
template <class E, class F, class Arg>
void append_results(std::vector<E>& out, F& fn, Arg&& arg) {
  using R = std::invoke_result_t<F&, Arg>;
  if constexpr (std::same_as<R, std::vector<E>>) {
    if (out.empty()) {
      out = std::invoke(fn, std::forward<Arg>(arg));
      return;
    }
  }
  R&& range = std::invoke(fn, std::forward<Arg>(arg));
  if constexpr (!std::is_reference_v<R> && !std::ranges::view<R> && !ranges::view_<R>) {
    for (auto&& item : range) out.push_back(std::move(item));
  } else {
    for (auto&& item : range) out.push_back(std::forward<decltype(item)>(item));
  }
}

}  // namespace dpipe::detail

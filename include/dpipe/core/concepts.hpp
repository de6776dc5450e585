#pragma once
/// \file
/// The named concepts that constrain the callables handed to nodes. A callable that does not fit
/// the element type fails to compile with a message naming the concept it violates.

#include <concepts>
#include <cstdint>
#include <optional>
#include <ranges>
#include <type_traits>

#include <range/v3/range/concepts.hpp>
#include <range/v3/range/traits.hpp>

namespace dpipe {

/// Element types dpipe can carry: movable objects (move-constructible and move-assignable; not
/// references, not void, not const).
template <class T>
concept element = std::is_object_v<T> && std::movable<T> && !std::is_const_v<T>;

/// Callables nodes store: copyable, because cloning a graph copies its nodes.
template <class F>
concept stored_callable = std::copy_constructible<F> && std::is_object_v<F>;

/// `map(fn)`: fn is invocable on an rvalue T (so it may take T by value, const T& or T&&) and
/// returns a value.
template <class F, class T>
concept map_fn = stored_callable<F> && std::invocable<F&, T> && !std::is_void_v<std::invoke_result_t<F&, T>> &&
                 element<std::remove_cvref_t<std::invoke_result_t<F&, T>>>;

/// The element type a map_fn produces (references decay to values).
template <class F, class T>
using map_result_t = std::remove_cvref_t<std::invoke_result_t<F&, T>>;

/// `filter(pred)`: pred is called with const T& and returns something convertible to bool.
template <class F, class T>
concept filter_fn = stored_callable<F> && std::predicate<F&, const T&>;

/// Input ranges in the std or the range-v3 sense (range-v3's views over 64-bit integers are not
/// std ranges: their difference type is 128 bits wide).
template <class R>
concept any_input_range = std::ranges::input_range<R> || ranges::input_range<R>;

namespace detail {
template <class R>
struct range_element {
  using type = ranges::range_value_t<R>;
};
template <class R>
requires std::ranges::input_range<R>
struct range_element<R> {
  using type = std::ranges::range_value_t<R>;
};
}  // namespace detail

/// The element type of an any_input_range.
template <class R>
using range_element_t = typename detail::range_element<R>::type;

/// `flatmap(fn)`: fn is invocable on an rvalue T and returns an input range; its elements are
/// yielded one by one.
template <class F, class T>
concept flatmap_fn = map_fn<F, T> && any_input_range<map_result_t<F, T>>;

/// The element type a flatmap_fn produces.
template <class F, class T>
using flatmap_result_t = range_element_t<map_result_t<F, T>>;

namespace detail {
template <class T>
struct is_optional_index : std::false_type {};
template <class I>
struct is_optional_index<std::optional<I>> : std::bool_constant<std::integral<I>> {};
}  // namespace detail

/// `demux(n, classifier)`: classifier is called with const T& and returns the output index, as an
/// integer or as std::optional of one (std::nullopt = torchdata's None).
template <class F, class T>
concept classifier_fn = stored_callable<F> && std::invocable<F&, const T&> &&
    (std::integral<std::remove_cvref_t<std::invoke_result_t<F&, const T&>>> ||
     detail::is_optional_index<std::remove_cvref_t<std::invoke_result_t<F&, const T&>>>::value);

/// Ranges `iter::from` accepts: an input range of movable values.
template <class R>
concept source_range = any_input_range<R> && element<range_element_t<R>>;

}  // namespace dpipe

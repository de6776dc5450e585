#pragma once
/// \file
/// The named concepts that constrain the callables handed to nodes. A callable that does not fit
/// the element type fails to compile with a message naming the concept it violates.

#include <concepts>
#include <cstdint>
#include <optional>
#include <ranges>
#include <type_traits>

namespace dpipe {

/// Element types dpipe can carry: movable objects (not references, not void).
template <class T>
concept element = std::is_object_v<T> && std::move_constructible<T> && !std::is_const_v<T>;

/// Callables nodes store: copyable, because cloning a graph copies its nodes.
template <class F>
concept stored_callable = std::copy_constructible<F> && std::is_object_v<F>;

/// `map(fn)`: fn is invocable on an rvalue T (so it may take T by value, const T& or T&&) and
/// returns a value.
template <class F, class T>
concept map_fn = stored_callable<F> && std::invocable<F&, T> &&
                 !std::is_void_v<std::invoke_result_t<F&, T>> &&
                 element<std::remove_cvref_t<std::invoke_result_t<F&, T>>>;

/// The element type a map_fn produces (references decay to values).
template <class F, class T>
using map_result_t = std::remove_cvref_t<std::invoke_result_t<F&, T>>;

/// `filter(pred)`: pred is called with const T& and returns something convertible to bool.
template <class F, class T>
concept filter_fn = stored_callable<F> && std::predicate<F&, const T&>;

/// `flatmap(fn)`: fn is invocable on an rvalue T and returns an input range; its elements are
/// yielded one by one.
template <class F, class T>
concept flatmap_fn = map_fn<F, T> && std::ranges::input_range<map_result_t<F, T>>;

/// The element type a flatmap_fn produces.
template <class F, class T>
using flatmap_result_t = std::ranges::range_value_t<map_result_t<F, T>>;

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
concept source_range = std::ranges::input_range<R> && element<std::ranges::range_value_t<R>>;

}  // namespace dpipe

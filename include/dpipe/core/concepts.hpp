#pragma once
/// \file
/// The named concepts that constrain the callables handed to nodes. A callable that does not fit
/// the element type fails to compile with a message naming the concept it violates.

#include <array>
#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

#include <range/v3/range/concepts.hpp>
#include <range/v3/range/traits.hpp>

namespace dpipe {

/// Element types dpipe can carry: movable objects (move-constructible and move-assignable; not
/// references, not void, not const).
template <class T>
concept element = std::is_object_v<T> && std::movable<T> && !std::is_const_v<T>;

/// Element types of the nodes that hand out copies of an element: fork and unzip (every branch),
/// repeat (the same element several times), in_memory_cache (replays what it kept) and
/// zip_longest with fill values (a fill value for each exhausted input). A move-only element
/// type, such as std::unique_ptr<T>, works with every other node; using one of these with it
/// fails to compile naming this concept.
template <class T>
concept copyable_element = element<T> && std::copy_constructible<T>;

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

/// `map_batches(fn, n)`: fn is invocable on an rvalue std::vector<T> and returns an input range.
template <class F, class T>
concept batch_fn = stored_callable<F> && std::invocable<F&, std::vector<T>> &&
    any_input_range<std::remove_cvref_t<std::invoke_result_t<F&, std::vector<T>>>>;

/// The element type a batch_fn produces.
template <class F, class T>
using batch_fn_result_t = range_element_t<std::remove_cvref_t<std::invoke_result_t<F&, std::vector<T>>>>;

/// Types usable as hash keys.
template <class K>
concept hashable = std::equality_comparable<K> && std::copy_constructible<K> && requires(const K& key) {
  { std::hash<K>{}(key) } -> std::convertible_to<std::size_t>;
};

/// `groupby(key_fn, ...)`: key_fn is called with const T& and returns a hashable key.
template <class F, class T>
concept key_fn = stored_callable<F> && std::invocable<F&, const T&> &&
    hashable<std::remove_cvref_t<std::invoke_result_t<F&, const T&>>>;

/// The key type a key_fn produces.
template <class F, class T>
using key_fn_result_t = std::remove_cvref_t<std::invoke_result_t<F&, const T&>>;

/// groupby's element type: the group, or (key, group) for groupby_keyed.
template <class F, class T, bool KeepKey>
using groupby_result_t = std::conditional_t<KeepKey, std::pair<key_fn_result_t<F, T>, std::vector<T>>, std::vector<T>>;

namespace detail {
template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};
}  // namespace detail

/// std::vector of anything.
template <class T>
concept is_vector = detail::is_vector<T>::value;

namespace detail {
template <class T>
struct is_tuple_like : std::false_type {};
template <class... Ts>
struct is_tuple_like<std::tuple<Ts...>> : std::true_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};
template <class T>
struct is_std_array : std::false_type {};
template <class T, std::size_t N>
struct is_std_array<std::array<T, N>> : std::true_type {};
}  // namespace detail

/// std::tuple or std::pair.
template <class T>
concept is_tuple_like = detail::is_tuple_like<T>::value;

/// std::array of anything.
template <class T>
concept is_std_array = detail::is_std_array<T>::value;

/// Ranges `iter::from` accepts: an input range of movable values.
template <class R>
concept source_range = any_input_range<R> && element<range_element_t<R>>;

}  // namespace dpipe

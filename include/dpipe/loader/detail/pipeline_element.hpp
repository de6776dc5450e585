#pragma once
/// \file
/// The compile-time check that DataLoader2<T> is given a pipeline of T: a pipeline of another
/// element type is a static assertion that names both types, not a list of every constructor
/// that does not fit. Internal to the loader.

#include <concepts>
#include <type_traits>

#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/map_pipe.hpp>

namespace dpipe::detail {

/// The element type of a pipe handle: U for an IterPipe<U>, a MapPipe<K, U> or a handle derived
/// from one (the handle a map() returns); void for any other type.
template <class Pipe>
struct pipe_element {
  using type = void;
};
template <class Pipe>
requires std::derived_from<Pipe, IterPipe<typename Pipe::value_type>>
struct pipe_element<Pipe> {
  using type = typename Pipe::value_type;
};
template <class Pipe>
requires std::derived_from<Pipe, MapPipe<typename Pipe::key_type, typename Pipe::mapped_type>>
struct pipe_element<Pipe> {
  using type = typename Pipe::mapped_type;
};

/// A pipe handle whose elements are not Element.
template <class Pipe, class Element>
concept pipe_of_other_element =
    !std::is_void_v<typename pipe_element<Pipe>::type> && !std::same_as<typename pipe_element<Pipe>::type, Element>;

/// Whether a DataLoader2<LoaderElement> runs a pipeline of PipelineElement: the static assertion
/// fails on it, and the compiler's note names both types in this order.
template <class LoaderElement, class PipelineElement>
inline constexpr bool loader_element_is_pipeline_element = std::is_same_v<LoaderElement, PipelineElement>;

}  // namespace dpipe::detail

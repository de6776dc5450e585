#pragma once
/// \file
/// Compiling the machinery of an element type once. Every IterDataPipe<T> brings per-type code
/// along: the node base's virtual functions, its input edge, and the operations the reading
/// services run on any node of the graph (the placeholder, the hand-off between worker threads,
/// the encoder and decoder of worker processes; see <dpipe/core/element_ops.hpp>). By default each
/// translation unit that builds a pipe of T compiles that code again. A project whose element type
/// appears in many translation units can compile it once:
///
///     // sample.hpp, after the type's definition (and its Serializer, if any)
///     #include <dpipe/core/iter_datapipe.hpp>
///     DPIPE_EXTERN_ELEMENT_TYPE(Sample);
///
///     // sample.cpp, exactly one translation unit of the program
///     #include "sample.hpp"
///     DPIPE_INSTANTIATE_ELEMENT_TYPE(Sample);
///
/// Both are used at global scope, with the type's full name. libdpipe does this for the types
/// <dpipe/core/detail/element_ops.hpp> lists (int, std::int64_t, float, double, std::string and
/// std::vector of each), so a pipeline of those compiles only its nodes. A type declared extern
/// and never instantiated fails at link time, naming dpipe::IterDataPipe<T>.

/// The explicit instantiations behind both macros; `keyword` is `extern` or nothing.
#define DPIPE_ELEMENT_TYPE_INSTANTIATIONS(keyword, ...)      \
  keyword template class ::dpipe::IterDataPipe<__VA_ARGS__>; \
  keyword template class ::dpipe::Input<__VA_ARGS__>;        \
  keyword template void ::dpipe::detail::register_element_ops<__VA_ARGS__>()

/// Declares that one translation unit compiles the machinery of element type `...` (see above).
#define DPIPE_EXTERN_ELEMENT_TYPE(...) DPIPE_ELEMENT_TYPE_INSTANTIATIONS(extern, __VA_ARGS__)

/// Compiles the machinery of element type `...` in this translation unit (see above).
#define DPIPE_INSTANTIATE_ELEMENT_TYPE(...) DPIPE_ELEMENT_TYPE_INSTANTIATIONS(, __VA_ARGS__)

#pragma once
/// \file
/// `filter(pred)` (torchdata's Filter): keeps the elements for which pred is true, under an error
/// policy (see <dpipe/iter/filter_node.hpp>). The length is unknown.
///
/// The bulk path reads ahead by an estimate of how many source elements it needs (from the pass
/// ratio seen so far, at most kMaxReadAhead per read), so that a selective filter does not call its
/// source once per missing element. Matches read ahead wait in a buffer that is part of the
/// checkpoint state; the element path never reads ahead, nor does a filter whose policy skips.

#include <utility>

#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/fusion.hpp>
#include <dpipe/iter/filter_node.hpp>

namespace dpipe {

template <class T>
template <filter_fn<T> F>
auto IterPipe<T>::filter(F pred, OnError on_error) const {
  return detail::ElementwisePipe<void, T>(*this).filter(std::move(pred), on_error);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::filter(pred)`, `src | iter::filter(pred, OnError::skip())`.
template <class F>
[[nodiscard]] auto filter(F pred, OnError on_error = OnError::raise()) {
  return PipeAdaptor{[pred = std::move(pred), on_error](const auto& source) { return source.filter(pred, on_error); }};
}

}  // namespace dpipe::iter

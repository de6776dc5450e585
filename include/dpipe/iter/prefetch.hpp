#pragma once
/// \file
/// `prefetch(buffer_size)` (torchdata's Prefetcher): a background thread reads up to
/// `buffer_size` elements ahead into a moodycamel queue. Exceptions from upstream reach the
/// consumer at their position. The thread stops and is joined on a new iteration, on pause() and
/// on destruction; it never polls (it blocks on semaphores). Checkpoint state: the elements read
/// ahead (save requires the node to be paused, which graph::save_state does).

#include <cstddef>

#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/prefetcher.hpp>

namespace dpipe {

template <class T>
IterPipe<T> IterPipe<T>::prefetch(std::size_t buffer_size) const {
  return make_iter<iter::Prefetcher<T>>(ptr(), buffer_size);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::prefetch(buffer_size)`.
[[nodiscard]] inline auto prefetch(std::size_t buffer_size = 10) {
  return PipeAdaptor{[=](const auto& source) { return source.prefetch(buffer_size); }};
}

}  // namespace dpipe::iter

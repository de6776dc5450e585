#pragma once
/// \file
/// `map(fn)` (torchdata's Mapper) and `collate(fn)` (Collator, a Mapper on batches): applies fn
/// to each element. Stateless; the length is the source's. Consecutive map and filter nodes built
/// in one chain run as one loop (see <dpipe/iter/detail/fusion.hpp>).

#include <string>
#include <utility>

#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/fusion.hpp>
#include <dpipe/iter/mapper.hpp>

namespace dpipe {

template <class T>
template <map_fn<T> F>
auto IterPipe<T>::map(F fn) const {
  return detail::ElementwisePipe<void, T>(*this).map(std::move(fn));
}

template <class T>
template <map_fn<T> F>
IterPipe<map_result_t<F, T>> IterPipe<T>::collate(F fn) const {
  using Collator = iter::Mapper<T, F>;
  return make_iter<Collator>(*this, std::move(fn), std::string(Collator::kCollateName));
}

template <class T>
template <class U>
requires requires(U batch) { detail::DefaultCollate{}(std::move(batch)); }
auto IterPipe<T>::collate() const { return collate(detail::DefaultCollate{}); }

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::collate(fn)`.
template <class F>
[[nodiscard]] auto collate(F fn) {
  return PipeAdaptor{[fn = std::move(fn)](const auto& source) { return source.collate(fn); }};
}

/// `src | iter::collate()`: a batch of tuples (or pairs) becomes a tuple (or pair) of vectors.
[[nodiscard]] inline auto collate() {
  return PipeAdaptor{[](const auto& source) { return source.collate(); }};
}

/// `src | iter::map(fn)`.
template <class F>
[[nodiscard]] auto map(F fn) {
  return PipeAdaptor{[fn = std::move(fn)](const auto& source) { return source.map(fn); }};
}

}  // namespace dpipe::iter

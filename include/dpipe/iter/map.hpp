#pragma once
/// \file
/// `map(fn)` (torchdata's Mapper) and `collate(fn)` (Collator, a Mapper on batches): applies fn
/// to each element, under an error policy (see <dpipe/iter/mapper.hpp>). Consecutive map and
/// filter nodes built in one chain run as one loop (see <dpipe/iter/detail/fusion.hpp>).

#include <string>
#include <utility>

#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/fusion.hpp>
#include <dpipe/iter/mapper.hpp>

namespace dpipe {

template <class T>
template <map_fn<T> F>
auto IterPipe<T>::map(F fn, OnError on_error) const {
  return detail::ElementwisePipe<void, T>(*this).map(std::move(fn), on_error);
}

template <class T>
template <map_fn<T> F>
IterPipe<map_result_t<F, T>> IterPipe<T>::collate(F fn, OnError on_error) const {
  using Collator = iter::Mapper<T, F>;
  return make_iter<Collator>(*this, std::move(fn), on_error, std::string(Collator::kCollateName));
}

template <class T>
template <class U>
requires requires(U batch) { detail::DefaultCollate{}(std::move(batch)); }
auto IterPipe<T>::collate(OnError on_error) const { return collate(detail::DefaultCollate{}, on_error); }

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::collate(fn)`, `src | iter::collate(fn, OnError::skip())`.
template <class F>
[[nodiscard]] auto collate(F fn, OnError on_error = OnError::raise()) {
  return PipeAdaptor{[fn = std::move(fn), on_error](const auto& source) { return source.collate(fn, on_error); }};
}

/// `src | iter::collate()`: a batch of tuples (or pairs) becomes a tuple (or pair) of vectors, a
/// batch of a DPIPE_FIELDS struct S a Columns<S>.
[[nodiscard]] inline auto collate(OnError on_error = OnError::raise()) {
  return PipeAdaptor{[on_error](const auto& source) { return source.collate(on_error); }};
}

/// `src | iter::map(fn)`, `src | iter::map(fn, OnError::skip())`.
template <class F>
[[nodiscard]] auto map(F fn, OnError on_error = OnError::raise()) {
  return PipeAdaptor{[fn = std::move(fn), on_error](const auto& source) { return source.map(fn, on_error); }};
}

}  // namespace dpipe::iter

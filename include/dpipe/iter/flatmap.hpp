#pragma once
/// \file
/// `flatmap(fn)` (torchdata's FlatMapper) and `unbatch()` (UnBatcher, one level): each element
/// becomes the elements of a range. Checkpoint state: the not yet yielded rest of the current
/// range. The length is unknown.

#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/functional.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/append_results.hpp>
#include <dpipe/iter/detail/expanding.hpp>
#include <dpipe/iter/skip_on_error.hpp>

namespace dpipe::iter {

template <class T, flatmap_fn<T> F>
class FlatMapper final : public detail::ExpandingPipe<flatmap_result_t<F, T>, FlatMapper<T, F>> {
  using E = flatmap_result_t<F, T>;
  using Base = detail::ExpandingPipe<E, FlatMapper>;
  friend Base;

 public:
  static constexpr std::string_view kName = "flatmap";
  /// The name of the FlatMapper that unbatch() makes.
  static constexpr std::string_view kUnbatchName = "unbatch";

  FlatMapper(const IterPipe<T>& source, F fn, std::string name = std::string(kName))
      : Base(std::move(name)), source_(source.ptr()), fn_(std::move(fn)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<FlatMapper>(*this); }

 private:
  /// The elements of fn(next source element); false at the end of the source.
  bool expand(std::vector<E>& run) {
    auto element = source_.next();
    if (!element) return false;
    detail::append_results(run, fn_, std::move(*element));
    return true;
  }

  Input<T> source_;
  F fn_;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <flatmap_fn<T> F>
IterPipe<flatmap_result_t<F, T>> IterPipe<T>::flatmap(F fn) const {
  return make_iter<iter::FlatMapper<T, F>>(*this, std::move(fn));
}

template <class T>
template <flatmap_fn<T> F>
IterPipe<flatmap_result_t<F, T>> IterPipe<T>::flatmap(F fn, OnError on_error) const {
  if (!on_error.skips()) return flatmap(std::move(fn));
  return iter::make_skipping<flatmap_result_t<F, T>>(*this, iter::FlatMapStep<F>{std::move(fn)}, on_error,
                                                     iter::FlatMapper<T, F>::kName);
}

template <class T>
template <class U>
requires source_range<U> IterPipe<range_element_t<U>> IterPipe<T>::unbatch()
const {
  using Unbatcher = iter::FlatMapper<T, detail::Identity>;
  return make_iter<Unbatcher>(*this, detail::Identity{}, std::string(Unbatcher::kUnbatchName));
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::flatmap(fn)`.
template <class F>
[[nodiscard]] auto flatmap(F fn) {
  return PipeAdaptor{[fn = std::move(fn)](const auto& source) { return source.flatmap(fn); }};
}

/// `src | iter::flatmap(fn, OnError::skip())`.
template <class F>
[[nodiscard]] auto flatmap(F fn, OnError on_error) {
  return PipeAdaptor{[fn = std::move(fn), on_error](const auto& source) { return source.flatmap(fn, on_error); }};
}

/// `src | iter::unbatch()`.
[[nodiscard]] inline auto unbatch() {
  return PipeAdaptor{[](const auto& source) { return source.unbatch(); }};
}

}  // namespace dpipe::iter

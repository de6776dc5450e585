#pragma once
/// \file
/// `map_batches(fn, batch_size)` (torchdata's BatchMapper): calls fn on vectors of `batch_size`
/// consecutive elements (the last may be shorter) and yields the elements of the ranges fn returns.
/// The length is unknown. Checkpoint state: the rest of fn's current output.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/checks.hpp>
#include <dpipe/core/detail/user_function.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/append_results.hpp>
#include <dpipe/iter/detail/expanding.hpp>

namespace dpipe::iter {

template <class T, batch_fn<T> F>
class BatchMapper final : public detail::ExpandingPipe<batch_fn_result_t<F, T>, BatchMapper<T, F>> {
  using U = batch_fn_result_t<F, T>;
  using Base = detail::ExpandingPipe<U, BatchMapper>;
  friend Base;

 public:
  static constexpr std::string_view kName = "map_batches";

  BatchMapper(const IterPipe<T>& source, F fn, std::size_t batch_size)
      : Base(std::string(kName)), source_(source.ptr()), fn_(std::move(fn)), batch_size_(batch_size) {
    detail::require_batch_size(batch_size);
  }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<BatchMapper>(*this); }
  [[nodiscard]] NodeSettings settings() const override { return {{"batch_size", std::to_string(batch_size_)}}; }

 private:
  /// The elements of fn(next batch); false at the end of the source.
  bool expand(std::vector<U>& run) {
    std::vector<T> batch;
    batch.reserve(batch_size_);
    if (source_.pull(batch, batch_size_) == 0) return false;
    detail::call_user_function(*this, [&] { detail::append_results(run, fn_, std::move(batch)); });
    return true;
  }

  Input<T> source_;
  F fn_;
  std::size_t batch_size_;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <batch_fn<T> F>
IterPipe<batch_fn_result_t<F, T>> IterPipe<T>::map_batches(F fn, std::size_t batch_size) const {
  return make_iter<iter::BatchMapper<T, F>>(*this, std::move(fn), batch_size);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::map_batches(fn, batch_size)`.
template <class F>
[[nodiscard]] auto map_batches(F fn, std::size_t batch_size) {
  return PipeAdaptor{[=](const auto& source) { return source.map_batches(fn, batch_size); }};
}

}  // namespace dpipe::iter

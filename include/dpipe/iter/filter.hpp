#pragma once
/// \file
/// `filter(pred)` (torchdata's Filter): keeps the elements for which pred is true. Stateless; the
/// length is unknown.

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/input.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T, filter_fn<T> F>
class Filter final : public IterDataPipe<T> {
 public:
  Filter(const IterPipe<T>& source, F pred)
      : IterDataPipe<T>("filter"), source_(source.ptr()), pred_(std::move(pred)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Filter>(*this); }
  [[nodiscard]] bool save_state(StateWriter& /*writer*/) const override { return true; }
  void load_state(StateReader& /*reader*/) override {}

 protected:
  std::optional<T> next_impl() override {
    while (auto element = source_.next()) {
      if (pred_(std::as_const(*element))) return element;
    }
    return std::nullopt;
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    // Requests only as many elements as are still missing, so nothing is read ahead.
    std::size_t produced = 0;
    while (produced < n) {
      staging_.clear();
      const std::size_t wanted = n - produced;
      const std::size_t got = source_.pull(staging_, wanted);
      for (auto& element : staging_) {
        if (pred_(std::as_const(element))) {
          out.push_back(std::move(element));
          ++produced;
        }
      }
      if (got < wanted) break;
    }
    staging_.clear();
    return produced;
  }

 private:
  Input<T> source_;
  F pred_;
  std::vector<T> staging_;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <filter_fn<T> F>
IterPipe<T> IterPipe<T>::filter(F pred) const {
  return make_iter<iter::Filter<T, F>>(*this, std::move(pred));
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::filter(pred)`.
template <class F>
[[nodiscard]] auto filter(F pred) {
  return PipeAdaptor{[pred = std::move(pred)](const auto& source) { return source.filter(pred); }};
}

}  // namespace dpipe::iter

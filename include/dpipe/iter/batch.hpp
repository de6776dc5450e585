#pragma once
/// \file
/// `batch(batch_size, drop_last)` (torchdata's Batcher): groups consecutive elements into vectors.
/// Stateless (it never reads ahead of the batch it returns).

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/detail/checks.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T>
class Batcher final : public IterDataPipe<std::vector<T>> {
 public:
  static constexpr std::string_view kName = "batch";

  Batcher(const IterPipe<T>& source, std::size_t batch_size, bool drop_last)
      : IterDataPipe<std::vector<T>>(std::string(kName)), source_(source.ptr()), shape_(batch_size, drop_last) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Batcher>(*this); }
  [[nodiscard]] NodeSettings settings() const override { return shape_.settings(); }
  [[nodiscard]] bool stateless() const noexcept override { return true; }

  [[nodiscard]] std::size_t batch_size() const noexcept { return shape_.size; }
  [[nodiscard]] bool drop_last() const noexcept { return shape_.drop_last; }

 protected:
  std::optional<std::vector<T>> next_impl() override {
    std::vector<T> batch;
    batch.reserve(shape_.size);
    const std::size_t got = source_.pull(batch, shape_.size);
    if (got == 0 || (got < shape_.size && shape_.drop_last)) return std::nullopt;
    return batch;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    const auto source_length = source_.length();
    if (!source_length) return std::nullopt;
    return shape_.count(*source_length);
  }

 private:
  Input<T> source_;
  detail::BatchShape shape_;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
IterPipe<std::vector<T>> IterPipe<T>::batch(std::size_t batch_size, bool drop_last) const {
  return make_iter<iter::Batcher<T>>(*this, batch_size, drop_last);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::batch(batch_size, drop_last)`.
[[nodiscard]] inline auto batch(std::size_t batch_size, bool drop_last = false) {
  return PipeAdaptor{[=](const auto& source) { return source.batch(batch_size, drop_last); }};
}

}  // namespace dpipe::iter

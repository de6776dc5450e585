#pragma once
/// \file
/// `enumerate(start)` (torchdata's Enumerator): pairs each element with its index. Checkpoint
/// state: the next index.

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/detail/iteration_local.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T>
class Enumerator final : public IterDataPipe<std::pair<std::int64_t, T>> {
  using Pair = std::pair<std::int64_t, T>;

 public:
  static constexpr std::string_view kName = "enumerate";

  Enumerator(const IterPipe<T>& source, std::int64_t start)
      : IterDataPipe<Pair>(std::string(kName)), source_(source.ptr()), start_(start), next_index_(start) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Enumerator>(*this); }
  [[nodiscard]] NodeSettings settings() const override { return {{"starting_index", std::to_string(start_)}}; }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("next_index", next_index_);
    return true;
  }
  void load_state(const StateReader& reader) override { next_index_ = reader.read<std::int64_t>("next_index"); }

 protected:
  void reset_impl() override {
    next_index_ = start_;
    source_.reset();
  }

  std::optional<Pair> next_impl() override {
    auto element = source_.next();
    if (!element) return std::nullopt;
    return std::optional<Pair>(std::in_place, next_index_++, std::move(*element));
  }

  std::size_t pull_impl(std::vector<Pair>& out, std::size_t n) override {
    staging_->clear();
    const std::size_t got = source_.pull(*staging_, n);
    for (auto& element : *staging_) out.emplace_back(next_index_++, std::move(element));
    staging_->clear();
    return got;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return source_.length(); }

 private:
  Input<T> source_;
  std::int64_t start_;
  std::int64_t next_index_;
  detail::IterationLocal<std::vector<T>> staging_;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
IterPipe<std::pair<std::int64_t, T>> IterPipe<T>::enumerate(std::int64_t start) const {
  return make_iter<iter::Enumerator<T>>(*this, start);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::enumerate(start)`.
[[nodiscard]] inline auto enumerate(std::int64_t start = 0) {
  return PipeAdaptor{[=](const auto& source) { return source.enumerate(start); }};
}

}  // namespace dpipe::iter

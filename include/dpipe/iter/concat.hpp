#pragma once
/// \file
/// `concat(others...)` (torchdata's Concater): each input in turn. An input starts its iteration
/// only when reached. Checkpoint state: which input is current.

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/detail/input_list.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T>
class Concater final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "concat";

  explicit Concater(const std::vector<IterPipe<T>>& sources) : IterDataPipe<T>(std::string(kName)), sources_(sources) {
    if (sources.empty()) DPIPE_THROW(InvalidArgument, "Expected at least one DataPipe, but got nothing");
  }

  void for_each_input(const InputVisitor& visit) override { sources_.visit(visit); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Concater>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("input", std::uint64_t{current_});
    writer.write("started", started_);
    return true;
  }
  void load_state(const StateReader& reader) override {
    current_ = reader.read<std::uint64_t>("input");
    started_ = reader.read<bool>("started");
    if (current_ > sources_.size())
      DPIPE_THROW(StateError, "{}: saved input {} of {}", this->label(), current_, sources_.size());
  }

 protected:
  void reset_impl() override {
    current_ = 0;
    started_ = false;
  }

  std::optional<T> next_impl() override {
    while (start_current()) {
      if (auto element = sources_[current_].next()) return element;
      advance();
    }
    return std::nullopt;
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    std::size_t produced = 0;
    while (produced < n && start_current()) {
      const std::size_t wanted = n - produced;
      const std::size_t got = sources_[current_].pull(out, wanted);
      produced += got;
      if (got < wanted) advance();
    }
    return produced;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return sources_.total_length(); }

 private:
  /// Starts the current input if needed; false once every input is exhausted.
  bool start_current() {
    if (current_ == sources_.size()) return false;
    if (!started_) {
      sources_[current_].reset();
      started_ = true;
    }
    return true;
  }

  void advance() {
    ++current_;
    started_ = false;
  }

  detail::InputList<T> sources_;
  std::size_t current_ = 0;
  bool started_ = false;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <std::convertible_to<IterPipe<T>>... Ps>
IterPipe<T> IterPipe<T>::concat(const Ps&... others) const {
  return make_iter<iter::Concater<T>>(std::vector<IterPipe<T>>{*this, others...});
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::concat(others...)`.
template <class T, class... Ps>
[[nodiscard]] auto concat(IterPipe<T> first, Ps... rest) {
  return PipeAdaptor{[=](const IterPipe<T>& source) { return source.concat(first, rest...); }};
}

}  // namespace dpipe::iter

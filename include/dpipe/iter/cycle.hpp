#pragma once
/// \file
/// `cycle(count)` (torchdata's Cycler): repeats the whole stream `count` times, or forever; each
/// pass starts a new iteration of the source (a shuffle upstream reshuffles). Unlike torchdata,
/// cycling an empty source forever ends instead of spinning. Checkpoint state: the pass number.

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T>
class Cycler final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "cycle";

  Cycler(const IterPipe<T>& source, std::optional<std::size_t> count)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), count_(count) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Cycler>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    return {{"count", count_ ? std::to_string(*count_) : std::string("none")}};
  }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("pass", std::uint64_t{pass_});
    writer.write("yielded_in_pass", yielded_in_pass_);
    writer.write("ended", ended_);
    return true;
  }
  void load_state(const StateReader& reader) override {
    pass_ = reader.read<std::uint64_t>("pass");
    yielded_in_pass_ = reader.read<bool>("yielded_in_pass");
    ended_ = reader.read<bool>("ended");
  }

 protected:
  void reset_impl() override {
    pass_ = 0;
    yielded_in_pass_ = false;
    ended_ = count_ == std::size_t{0};
    source_.reset();
  }

  std::optional<T> next_impl() override {
    while (!ended_) {
      if (auto element = source_.next()) {
        yielded_in_pass_ = true;
        return element;
      }
      end_pass();
    }
    return std::nullopt;
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    std::size_t produced = 0;
    while (produced < n && !ended_) {
      const std::size_t wanted = n - produced;
      const std::size_t got = source_.pull(out, wanted);
      produced += got;
      if (got > 0) yielded_in_pass_ = true;
      if (got < wanted) end_pass();
    }
    return produced;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    if (!count_) return std::nullopt;
    const auto source_length = source_.length();
    if (!source_length) return std::nullopt;
    return *source_length * *count_;
  }

  [[nodiscard]] std::string no_length_reason() const override {
    if (count_) return IterDataPipe<T>::no_length_reason();
    return "This " + this->label() + " instance cycles forever, and therefore doesn't have valid length";
  }

 private:
  void end_pass() {
    ++pass_;
    if ((count_ && pass_ >= *count_) || !yielded_in_pass_) {
      ended_ = true;
      return;
    }
    yielded_in_pass_ = false;
    source_.reset();
  }

  Input<T> source_;
  std::optional<std::size_t> count_;
  std::size_t pass_ = 0;
  bool yielded_in_pass_ = false;
  bool ended_ = false;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
IterPipe<T> IterPipe<T>::cycle(std::optional<std::size_t> count) const {
  return make_iter<iter::Cycler<T>>(*this, count);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::cycle(count)`.
[[nodiscard]] inline auto cycle(std::optional<std::size_t> count = std::nullopt) {
  return PipeAdaptor{[=](const auto& source) { return source.cycle(count); }};
}

}  // namespace dpipe::iter

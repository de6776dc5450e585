#pragma once
/// \file
/// `repeat(times)` (torchdata's Repeater): yields each element `times` times in a row. Checkpoint
/// state: the current element and how many copies are left.

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T>
class Repeater final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "repeat";

  Repeater(const IterPipe<T>& source, std::size_t times)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), times_(times) {
    if (times <= 1) DPIPE_THROW(InvalidArgument, "The number of repetition must be > 1, got {}", times);
  }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Repeater>(*this); }
  [[nodiscard]] NodeSettings settings() const override { return {{"times", std::to_string(times_)}}; }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("left", std::uint64_t{left_});
    std::vector<T> current;
    if (current_) current.push_back(*current_);
    detail::write_elements<T>(writer, "current", *this, current);
    return true;
  }
  void load_state(const StateReader& reader) override {
    left_ = reader.read<std::uint64_t>("left");
    auto current = detail::read_elements<T>(reader, "current", *this);
    if (current.size() > 1 || left_ >= times_ || (left_ > 0) != (current.size() == 1)) {
      DPIPE_THROW(StateError, "{}: the saved repetition state is inconsistent", this->label());
    }
    current_.reset();
    if (!current.empty()) current_.emplace(std::move(current.front()));
  }

 protected:
  void reset_impl() override {
    current_.reset();
    left_ = 0;
    source_.reset();
  }

  std::optional<T> next_impl() override {
    if (left_ == 0) {
      current_ = source_.next();
      if (!current_) return std::nullopt;
      left_ = times_;
    }
    if (--left_ == 0) return std::exchange(current_, std::nullopt);
    return current_;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    const auto source_length = source_.length();
    if (!source_length) return std::nullopt;
    return *source_length * times_;
  }

 private:
  Input<T> source_;
  std::size_t times_;
  std::optional<T> current_;
  std::size_t left_ = 0;  // copies of current_ still to yield
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <class U>
requires copyable_element<U> IterPipe<T> IterPipe<T>::repeat(std::size_t times)
const { return make_iter<iter::Repeater<T>>(*this, times); }

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::repeat(times)`.
[[nodiscard]] inline auto repeat(std::size_t times) {
  return PipeAdaptor{[=](const auto& source) { return source.repeat(times); }};
}

}  // namespace dpipe::iter

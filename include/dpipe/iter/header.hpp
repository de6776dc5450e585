#pragma once
/// \file
/// `header(limit)` (torchdata's Header): yields at most `limit` elements. Unlike torchdata it stops
/// without reading element limit+1 from its source. Checkpoint state: the count yielded.

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/logging.hpp>

namespace dpipe::iter {

template <class T>
class Header final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "header";

  Header(const IterPipe<T>& source, std::size_t limit)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), limit_(limit) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Header>(*this); }
  [[nodiscard]] NodeSettings settings() const override { return {{"limit", std::to_string(limit_)}}; }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("count", std::uint64_t{count_});
    return true;
  }
  void load_state(const StateReader& reader) override {
    count_ = reader.read<std::uint64_t>("count");
    if (count_ > limit_)
      DPIPE_THROW(StateError, "{}: saved count {} exceeds the limit {}", this->label(), count_, limit_);
  }

 protected:
  void reset_impl() override {
    count_ = 0;
    source_.reset();
  }

  std::optional<T> next_impl() override {
    if (count_ >= limit_) return std::nullopt;
    auto element = source_.next();
    if (element)
      ++count_;
    else
      count_ = limit_;  // the source ended: stay ended
    return element;
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    const std::size_t wanted = std::min(n, limit_ - count_);
    const std::size_t got = wanted == 0 ? 0 : source_.pull(out, wanted);
    count_ = got < wanted ? limit_ : count_ + got;
    return got;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    if (const auto source_length = source_.length()) return std::min(*source_length, limit_);
    log_warning(
        "The length of this HeaderIterDataPipe is inferred to be equal to its limit.The actual value "
        "may be smaller if the actual length of source_datapipe is smaller than the limit. ({})",
        this->label());
    return limit_;
  }

 private:
  Input<T> source_;
  std::size_t limit_;
  std::size_t count_ = 0;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
IterPipe<T> IterPipe<T>::header(std::size_t limit) const {
  return make_iter<iter::Header<T>>(*this, limit);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::header(limit)`.
[[nodiscard]] inline auto header(std::size_t limit = 10) {
  return PipeAdaptor{[=](const auto& source) { return source.header(limit); }};
}

}  // namespace dpipe::iter

#pragma once
/// \file
/// `mux_longest(others...)` (torchdata's MultiplexerLongest): one element from each input in turn,
/// skipping exhausted inputs, until all are exhausted. Checkpoint state: the next input and which
/// inputs are exhausted.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/input_list.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T>
class MultiplexerLongest final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "mux_longest";

  explicit MultiplexerLongest(const std::vector<IterPipe<T>>& sources)
      : IterDataPipe<T>(std::string(kName)), sources_(sources), exhausted_(sources.size(), false) {}

  void for_each_input(const InputVisitor& visit) override { sources_.visit(visit); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<MultiplexerLongest>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("next", std::uint64_t{next_});
    writer.write("exhausted", exhausted_);
    return true;
  }
  void load_state(const StateReader& reader) override {
    next_ = reader.read<std::uint64_t>("next");
    auto exhausted = reader.read<std::vector<bool>>("exhausted");
    if (exhausted.size() != sources_.size() || next_ >= std::max<std::size_t>(sources_.size(), 1)) {
      DPIPE_THROW(StateError, "{}: the saved state is for another number of inputs", this->label());
    }
    exhausted_ = std::move(exhausted);
  }

 protected:
  void reset_impl() override {
    next_ = 0;
    exhausted_.assign(sources_.size(), false);
    IterDataPipe<T>::reset_impl();
  }

  std::optional<T> next_impl() override {
    while (std::ranges::find(exhausted_, false) != exhausted_.end()) {
      const std::size_t current = next_;
      next_ = (next_ + 1) % sources_.size();
      if (exhausted_[current]) continue;
      if (auto element = sources_[current].next()) return element;
      exhausted_[current] = true;
    }
    return std::nullopt;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return sources_.total_length(); }

 private:
  detail::InputList<T> sources_;
  std::vector<bool> exhausted_;
  std::size_t next_ = 0;  // the input to read next
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <std::convertible_to<IterPipe<T>>... Ps>
IterPipe<T> IterPipe<T>::mux_longest(const Ps&... others) const {
  return make_iter<iter::MultiplexerLongest<T>>(std::vector<IterPipe<T>>{*this, others...});
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::mux_longest(others...)`.
template <class T, class... Ps>
[[nodiscard]] auto mux_longest(IterPipe<T> first, Ps... rest) {
  return PipeAdaptor{[=](const IterPipe<T>& source) { return source.mux_longest(first, rest...); }};
}

}  // namespace dpipe::iter

#pragma once
/// \file
/// `mux(others...)` (torchdata's Multiplexer): one element from each input per round; ends when
/// the shortest input is exhausted and drops that partly collected round. Checkpoint state: the
/// current round's elements not yet yielded.

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/detail/input_list.hpp>
#include <dpipe/core/detail/pending.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T>
class Multiplexer final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "mux";

  explicit Multiplexer(const std::vector<IterPipe<T>>& sources)
      : IterDataPipe<T>(std::string(kName)), sources_(sources) {}

  void for_each_input(const InputVisitor& visit) override { sources_.visit(visit); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Multiplexer>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("ended", ended_);
    round_.save_state(writer, "round", *this);
    return true;
  }
  void load_state(const StateReader& reader) override {
    ended_ = reader.read<bool>("ended");
    round_.load_state(reader, "round", *this);
  }

 protected:
  void reset_impl() override {
    round_.clear();
    ended_ = false;
    IterDataPipe<T>::reset_impl();
  }

  std::optional<T> next_impl() override {
    if (round_.empty() && !collect_round()) return std::nullopt;
    return round_.take();
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    const auto shortest = sources_.shortest_length();
    if (!shortest) return std::nullopt;
    return *shortest * sources_.size();
  }

 private:
  bool collect_round() {
    auto& round = round_.refill();
    if (ended_ || sources_.empty()) return false;
    for (auto& source : sources_) {
      auto element = source.next();
      if (!element) {
        round_.clear();
        ended_ = true;
        return false;
      }
      round.push_back(std::move(*element));
    }
    return true;
  }

  detail::InputList<T> sources_;
  detail::Pending<T> round_;  // the current round's elements not yet yielded
  bool ended_ = false;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <std::convertible_to<IterPipe<T>>... Ps>
IterPipe<T> IterPipe<T>::mux(const Ps&... others) const {
  return make_iter<iter::Multiplexer<T>>(std::vector<IterPipe<T>>{*this, others...});
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::mux(others...)`.
template <class T, class... Ps>
[[nodiscard]] auto mux(IterPipe<T> first, Ps... rest) {
  return PipeAdaptor{[=](const IterPipe<T>& source) { return source.mux(first, rest...); }};
}

}  // namespace dpipe::iter

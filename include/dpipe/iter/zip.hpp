#pragma once
/// \file
/// `zip(others...)` (torchdata's Zipper): tuples of one element from each input; ends with the
/// shortest input (elements already read from earlier inputs in that last round are dropped, as
/// in torchdata). Checkpoint state: whether it has ended.

#include <algorithm>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <dpipe/core/detail/input_list.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class... Ts>
class Zipper final : public IterDataPipe<std::tuple<Ts...>> {
  using Tuple = std::tuple<Ts...>;

 public:
  static constexpr std::string_view kName = "zip";

  explicit Zipper(const IterPipe<Ts>&... sources)
      : IterDataPipe<Tuple>(std::string(kName)), sources_(Input<Ts>(sources.ptr())...) {}

  void for_each_input(const InputVisitor& visit) override { detail::visit_all(sources_, visit); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Zipper>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("ended", ended_);
    return true;
  }
  void load_state(const StateReader& reader) override { ended_ = reader.read<bool>("ended"); }

 protected:
  void reset_impl() override {
    ended_ = false;
    IterDataPipe<Tuple>::reset_impl();
  }

  std::optional<Tuple> next_impl() override {
    if (ended_) return std::nullopt;
    // Braced initialization evaluates left to right.
    auto elements = std::apply(
        [this](auto&... input) { return std::tuple<std::optional<Ts>...>{next_in_order(input)...}; }, sources_);
    return finish(elements, std::index_sequence_for<Ts...>{});
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    const auto lengths = detail::lengths_of(sources_);
    if (!lengths || lengths->empty()) return std::nullopt;
    return std::ranges::min(*lengths);
  }

 private:
  // Reads inputs left to right and stops reading at the first exhausted one, as Python's zip.
  template <class U>
  std::optional<U> next_in_order(Input<U>& input) {
    if (stopped_round_) return std::nullopt;
    auto element = input.next();
    if (!element) stopped_round_ = true;
    return element;
  }

  template <class Elements, std::size_t... I>
  std::optional<Tuple> finish(Elements& elements, std::index_sequence<I...>) {
    if (std::exchange(stopped_round_, false)) {
      ended_ = true;
      return std::nullopt;
    }
    return std::optional<Tuple>(std::in_place, std::move(*std::get<I>(elements))...);
  }

  std::tuple<Input<Ts>...> sources_;
  bool ended_ = false;
  bool stopped_round_ = false;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <class... Us>
IterPipe<std::tuple<T, Us...>> IterPipe<T>::zip(const IterPipe<Us>&... others) const {
  return make_iter<iter::Zipper<T, Us...>>(*this, others...);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::zip(others...)`.
template <class... Us>
[[nodiscard]] auto zip(IterPipe<Us>... others) {
  return PipeAdaptor{[=](const auto& source) { return source.zip(others...); }};
}

}  // namespace dpipe::iter

#pragma once
/// \file
/// `zip_longest(others...)` (torchdata's ZipperLongest): tuples of one element per input until every
/// input is exhausted; an exhausted input contributes its fill value. Without fill values the tuple
/// holds std::optional elements and fills with std::nullopt (torchdata's None); with
/// `zip_longest(fill, others...)` the tuple holds plain elements. Checkpoint state: which inputs are
/// exhausted.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <dpipe/core/detail/input_list.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

/// The fill of zip_longest(others...): an exhausted input gives std::nullopt. Storing no value
/// keeps the node clonable when the elements are move-only.
struct NoFill {};

}  // namespace dpipe::iter

namespace dpipe::detail {

/// The element type of a ZipperLongest<Fill, Ts...>.
template <class Fill, class... Ts>
struct zip_longest_tuple {
  using type = Fill;
};
template <class... Ts>
struct zip_longest_tuple<iter::NoFill, Ts...> {
  using type = std::tuple<std::optional<Ts>...>;
};

}  // namespace dpipe::detail

namespace dpipe::iter {

/// Yields std::tuple<std::optional<Ts>...> with NoFill, else `Fill` (a std::tuple of plain
/// elements, one per input, copied for each input once it is exhausted).
template <class Fill, class... Ts>
class ZipperLongest final : public IterDataPipe<typename detail::zip_longest_tuple<Fill, Ts...>::type> {
  using Tuple = typename detail::zip_longest_tuple<Fill, Ts...>::type;

 public:
  static constexpr std::string_view kName = "zip_longest";

  ZipperLongest(Fill fill, const IterPipe<Ts>&... sources)
      : IterDataPipe<Tuple>(std::string(kName)), sources_(Input<Ts>(sources.ptr())...), fill_(std::move(fill)) {}

  void for_each_input(const InputVisitor& visit) override { detail::visit_all(sources_, visit); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<ZipperLongest>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("exhausted", exhausted_);
    return true;
  }
  void load_state(const StateReader& reader) override {
    auto exhausted = reader.read<std::array<bool, sizeof...(Ts)>>("exhausted");
    exhausted_ = exhausted;
  }

 protected:
  void reset_impl() override {
    exhausted_.fill(false);
    IterDataPipe<Tuple>::reset_impl();
  }

  std::optional<Tuple> next_impl() override { return next_tuple(std::index_sequence_for<Ts...>{}); }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    const auto lengths = detail::lengths_of(sources_);
    if (!lengths || lengths->empty()) return std::nullopt;
    return std::ranges::max(*lengths);
  }

 private:
  template <std::size_t... I>
  std::optional<Tuple> next_tuple(std::index_sequence<I...>) {
    // Braced initialization reads the inputs left to right.
    std::tuple<std::optional<std::tuple_element_t<I, Tuple>>...> values{read<I>()...};
    if ((exhausted_[I] && ...)) return std::nullopt;  // all exhausted: no all-fill tuple
    return std::optional<Tuple>(std::in_place, std::move(*std::get<I>(values))...);
  }

  /// Input I's next element as a tuple element, or its fill value once it is exhausted.
  template <std::size_t I>
  std::optional<std::tuple_element_t<I, Tuple>> read() {
    using Value = std::tuple_element_t<I, Tuple>;
    if (!exhausted_[I]) {
      if (auto element = std::get<I>(sources_).next()) return Value(std::move(*element));
      exhausted_[I] = true;
    }
    if constexpr (std::is_same_v<Fill, NoFill>) {
      return std::optional<Value>(std::in_place);  // an empty std::optional
    } else {
      return std::get<I>(fill_);
    }
  }

  std::tuple<Input<Ts>...> sources_;
  [[no_unique_address]] Fill fill_;
  std::array<bool, sizeof...(Ts)> exhausted_{};
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <class... Us>
IterPipe<std::tuple<std::optional<T>, std::optional<Us>...>> IterPipe<T>::zip_longest(
    const IterPipe<Us>&... others) const {
  return make_iter<iter::ZipperLongest<iter::NoFill, T, Us...>>(iter::NoFill{}, *this, others...);
}

template <class T>
template <class... Us>
requires(copyable_element<T>&&...&& copyable_element<Us>) IterPipe<std::tuple<T, Us...>> IterPipe<T>::zip_longest(
    std::tuple<T, Us...> fill, const IterPipe<Us>&... others)
const { return make_iter<iter::ZipperLongest<std::tuple<T, Us...>, T, Us...>>(std::move(fill), *this, others...); }

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::zip_longest(others...)`: tuples of std::optional.
template <class... Us>
[[nodiscard]] auto zip_longest(IterPipe<Us>... others) {
  return PipeAdaptor{[=](const auto& source) { return source.zip_longest(others...); }};
}

}  // namespace dpipe::iter

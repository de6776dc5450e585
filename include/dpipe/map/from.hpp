#pragma once
/// \file
/// `map::from(sequence)` (torchdata's SequenceWrapper): a map pipe over a random-access range,
/// keyed 0 .. size-1. The node holds an immutable copy of the range, shared between graph clones.

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

#include <dpipe/core/concepts.hpp>
#include <dpipe/core/map_datapipe.hpp>
#include <dpipe/core/map_pipe.hpp>

namespace dpipe::map {

/// Random-access ranges map::from accepts.
template <class R>
concept sequence = std::ranges::random_access_range<const R> && std::ranges::sized_range<const R> &&
    element<std::ranges::range_value_t<R>>;

template <sequence R>
class SequenceWrapper final : public MapDataPipe<std::size_t, std::ranges::range_value_t<R>> {
  using V = std::ranges::range_value_t<R>;

 public:
  static constexpr std::string_view kName = "from";

  template <class Arg>
  explicit SequenceWrapper(Arg&& sequence)
      : MapDataPipe<std::size_t, V>(std::string(kName)),
        sequence_(std::make_shared<const R>(std::forward<Arg>(sequence))) {}

  void for_each_input(const InputVisitor& /*visit*/) override {}
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<SequenceWrapper>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    return {{"length", std::to_string(std::ranges::size(*sequence_))}};
  }

 protected:
  V get_impl(const std::size_t& key) override {
    const auto size = size_impl();
    if (key >= size) DPIPE_THROW(KeyError, "{}: index {} is out of range for {} elements", this->label(), key, size);
    return std::ranges::begin(*sequence_)[static_cast<std::ptrdiff_t>(key)];
  }
  [[nodiscard]] std::size_t size_impl() const override {
    return static_cast<std::size_t>(std::ranges::size(*sequence_));
  }
  /// Starts loading the element's memory (the first cache line of it).
  void prefetch_impl(const std::size_t& key) const noexcept override {
    if (key < size_impl())
      __builtin_prefetch(std::addressof(std::ranges::begin(*sequence_)[static_cast<std::ptrdiff_t>(key)]));
  }

 private:
  std::shared_ptr<const R> sequence_;
};

/// A map pipe over `sequence`.
template <sequence R>
[[nodiscard]] MapPipe<std::size_t, std::ranges::range_value_t<R>> from(R&& sequence) {
  return make_map<SequenceWrapper<std::remove_cvref_t<R>>>(std::forward<R>(sequence));
}

/// A map pipe over the listed values.
template <element T>
[[nodiscard]] MapPipe<std::size_t, T> from(std::initializer_list<T> values) {
  return from(std::vector<T>(values));
}

}  // namespace dpipe::map

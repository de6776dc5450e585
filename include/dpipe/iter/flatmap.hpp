#pragma once
/// \file
/// `flatmap(fn)` (torchdata's FlatMapper) and `unbatch()` (UnBatcher, one level): each element
/// becomes the elements of a range. Checkpoint state: the not yet yielded rest of the current
/// range. The length is unknown.

#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/input.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/pending.hpp>

namespace dpipe::iter {

template <class T, flatmap_fn<T> F>
class FlatMapper final : public IterDataPipe<flatmap_result_t<F, T>> {
  using E = flatmap_result_t<F, T>;
  using R = map_result_t<F, T>;

 public:
  static constexpr std::string_view kName = "flatmap";
  /// The name of the FlatMapper that unbatch() makes.
  static constexpr std::string_view kUnbatchName = "unbatch";

  FlatMapper(const IterPipe<T>& source, F fn, std::string name = std::string(kName))
      : IterDataPipe<E>(std::move(name)), source_(source.ptr()), fn_(std::move(fn)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<FlatMapper>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    pending_.save(writer, *this);
    return true;
  }
  void load_state(StateReader& reader) override { pending_.load(reader, *this); }

 protected:
  void reset_impl() override {
    pending_.clear();
    source_.reset();
  }

  std::optional<E> next_impl() override {
    if (!refill()) return std::nullopt;
    return pending_.take();
  }

  [[nodiscard]] std::string no_length_reason() const override {
    return this->label() + "'s length relies on the output of its function.";
  }

  std::size_t pull_impl(std::vector<E>& out, std::size_t n) override {
    std::size_t produced = 0;
    while (produced < n && refill()) produced += pending_.take_into(out, n - produced);
    return produced;
  }

 private:
  /// Makes an element available in pending_; false at the end of the source.
  bool refill() {
    while (pending_.empty()) {
      auto element = source_.next();
      if (!element) return false;
      std::vector<E> expanded;
      if constexpr (std::same_as<R, std::vector<E>>) {
        expanded = fn_(std::move(*element));
      } else {
        auto&& range = fn_(std::move(*element));
        for (auto&& item : range) expanded.push_back(std::forward<decltype(item)>(item));
      }
      pending_.assign(std::move(expanded));
    }
    return true;
  }

  Input<T> source_;
  F fn_;
  detail::Pending<E> pending_;  // the rest of the current expansion
};

}  // namespace dpipe::iter

namespace dpipe {

namespace detail {
/// The identity, for unbatch().
struct Identity {
  template <class X>
  X operator()(X&& value) const {
    return std::forward<X>(value);
  }
};
}  // namespace detail

template <class T>
template <flatmap_fn<T> F>
IterPipe<flatmap_result_t<F, T>> IterPipe<T>::flatmap(F fn) const {
  return make_iter<iter::FlatMapper<T, F>>(*this, std::move(fn));
}

template <class T>
template <class U>
requires source_range<U> IterPipe<range_element_t<U>> IterPipe<T>::unbatch()
const {
  using Unbatcher = iter::FlatMapper<T, detail::Identity>;
  return make_iter<Unbatcher>(*this, detail::Identity{}, std::string(Unbatcher::kUnbatchName));
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::flatmap(fn)`.
template <class F>
[[nodiscard]] auto flatmap(F fn) {
  return PipeAdaptor{[fn = std::move(fn)](const auto& source) { return source.flatmap(fn); }};
}

/// `src | iter::unbatch()`.
[[nodiscard]] inline auto unbatch() {
  return PipeAdaptor{[](const auto& source) { return source.unbatch(); }};
}

}  // namespace dpipe::iter

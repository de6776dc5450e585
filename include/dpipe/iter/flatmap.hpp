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
#include <dpipe/core/state.hpp>

namespace dpipe::iter {

template <class T, flatmap_fn<T> F>
class FlatMapper final : public IterDataPipe<flatmap_result_t<F, T>> {
  using E = flatmap_result_t<F, T>;
  using R = map_result_t<F, T>;

 public:
  FlatMapper(const IterPipe<T>& source, F fn, std::string name = "flatmap")
      : IterDataPipe<E>(std::move(name)), source_(source.ptr()), fn_(std::move(fn)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<FlatMapper>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    detail::write_elements<E>(writer, *this, std::ranges::subrange(pending_.begin() + static_cast<std::ptrdiff_t>(next_), pending_.end()));
    return true;
  }
  void load_state(StateReader& reader) override {
    pending_ = detail::read_elements<E>(reader, *this);
    next_ = 0;
  }

 protected:
  void reset_impl() override {
    pending_.clear();
    next_ = 0;
    source_.reset();
  }

  std::optional<E> next_impl() override {
    if (!refill()) return std::nullopt;
    return std::optional<E>(std::in_place, std::move(pending_[next_++]));
  }

  [[nodiscard]] std::string no_length_reason() const override {
    return this->label() + "'s length relies on the output of its function.";
  }

  std::size_t pull_impl(std::vector<E>& out, std::size_t n) override {
    std::size_t produced = 0;
    while (produced < n && refill()) {
      const std::size_t take = std::min(n - produced, pending_.size() - next_);
      const auto first = pending_.begin() + static_cast<std::ptrdiff_t>(next_);
      out.insert(out.end(), std::make_move_iterator(first), std::make_move_iterator(first + static_cast<std::ptrdiff_t>(take)));
      next_ += take;
      produced += take;
    }
    return produced;
  }

 private:
  /// Makes an element available in pending_; false at the end of the source.
  bool refill() {
    while (next_ == pending_.size()) {
      auto element = source_.next();
      if (!element) return false;
      std::vector<E> expanded;
      if constexpr (std::same_as<R, std::vector<E>>) {
        expanded = fn_(std::move(*element));
      } else {
        auto&& range = fn_(std::move(*element));
        for (auto&& item : range) expanded.push_back(std::forward<decltype(item)>(item));
      }
      pending_ = std::move(expanded);
      next_ = 0;
    }
    return true;
  }

  Input<T> source_;
  F fn_;
  std::vector<E> pending_;
  std::size_t next_ = 0;
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
  requires source_range<U>
IterPipe<std::ranges::range_value_t<U>> IterPipe<T>::unbatch() const {
  return make_iter<iter::FlatMapper<T, detail::Identity>>(*this, detail::Identity{}, "unbatch");
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

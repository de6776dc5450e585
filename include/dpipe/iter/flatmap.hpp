#pragma once
/// \file
/// `flatmap(fn)` (torchdata's FlatMapper) and `unbatch()` (UnBatcher, one level): each element
/// becomes the elements of a range. Checkpoint state: the not yet yielded rest of the current
/// range. The length is unknown. Under OnError::skip() the elements fn throws on are dropped,
/// logged and counted (see <dpipe/core/error_policy.hpp>), and the checkpoint state also holds the
/// epoch's element index and skip count.

#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/functional.hpp>
#include <dpipe/core/detail/user_function.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/iter/detail/append_results.hpp>
#include <dpipe/iter/detail/element_policy.hpp>
#include <dpipe/iter/detail/expanding.hpp>

namespace dpipe::iter {

template <class T, flatmap_fn<T> F>
class FlatMapper final : public detail::ExpandingPipe<flatmap_result_t<F, T>, FlatMapper<T, F>> {
  using E = flatmap_result_t<F, T>;
  using Base = detail::ExpandingPipe<E, FlatMapper>;
  friend Base;

 public:
  static constexpr std::string_view kName = "flatmap";
  /// The name of the FlatMapper that unbatch() makes.
  static constexpr std::string_view kUnbatchName = "unbatch";

  FlatMapper(const IterPipe<T>& source, F fn, OnError on_error = OnError::raise(),
             std::string name = std::string(kName))
      : Base(std::move(name)), source_(source.ptr()), fn_(std::move(fn)), policy_(on_error) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<FlatMapper>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    if (policy_.skips()) policy_.save_state(writer);
    return Base::save_state(writer);
  }
  void load_state(const StateReader& reader) override {
    if (policy_.skips()) policy_.load_state(reader);
    Base::load_state(reader);
  }

 protected:
  void reset_impl() override {
    policy_.reset();
    Base::reset_impl();
  }

 private:
  /// The elements of fn(next source element), none when fn throws on it and the policy skips it
  /// (logged and counted); false at the end of the source. `run` is empty.
  bool expand(std::vector<E>& run) {
    auto element = source_.next();
    if (!element) return false;
    if (!policy_.skips()) {
      detail::call_user_function(*this, [&] { detail::append_results(run, fn_, std::move(*element)); });
    } else if (!policy_.attempt(*this, [&] { detail::append_results(run, fn_, std::move(*element)); })) {
      run.clear();  // what the range yielded before it threw
      this->count_skipped();
    }
    return true;
  }

  Input<T> source_;
  F fn_;
  detail::ElementPolicy policy_;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <flatmap_fn<T> F>
IterPipe<flatmap_result_t<F, T>> IterPipe<T>::flatmap(F fn, OnError on_error) const {
  return make_iter<iter::FlatMapper<T, F>>(*this, std::move(fn), on_error);
}

template <class T>
template <class U>
requires source_range<U> IterPipe<range_element_t<U>> IterPipe<T>::unbatch()
const {
  using Unbatcher = iter::FlatMapper<T, detail::Identity>;
  return make_iter<Unbatcher>(*this, detail::Identity{}, OnError::raise(), std::string(Unbatcher::kUnbatchName));
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::flatmap(fn)`, `src | iter::flatmap(fn, OnError::skip())`.
template <class F>
[[nodiscard]] auto flatmap(F fn, OnError on_error = OnError::raise()) {
  return PipeAdaptor{[fn = std::move(fn), on_error](const auto& source) { return source.flatmap(fn, on_error); }};
}

/// `src | iter::unbatch()`.
[[nodiscard]] inline auto unbatch() {
  return PipeAdaptor{[](const auto& source) { return source.unbatch(); }};
}

}  // namespace dpipe::iter

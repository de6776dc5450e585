#pragma once
/// \file
/// SkipOnError<T, U, Step>, the node behind `flatmap` with `OnError::skip()`: applies the user's
/// function to each element and drops (logs, counts) the elements it throws on.
/// Exceptions from upstream still end the epoch. Checkpoint state: the epoch's element index, the
/// skip count and the outputs not yet handed out. The length is unknown, since any element may be
/// skipped.

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/element_skipper.hpp>
#include <dpipe/core/detail/iteration_local.hpp>
#include <dpipe/core/detail/pending.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/append_results.hpp>

namespace dpipe::iter {

/// The step: appends what one input element becomes to `out` (the elements of a range).
template <class F>
struct FlatMapStep {
  F fn;
  template <class T, class U>
  void operator()(T&& element, std::vector<U>& out) {
    detail::append_results(out, fn, std::forward<T>(element));
  }
};

template <class T, class U, class Step>
class SkipOnError final : public IterDataPipe<U> {
 public:
  /// The most source elements one bulk read asks for.
  static constexpr std::size_t kMaxRead = 256;

  SkipOnError(const IterPipe<T>& source, Step step, OnError policy, std::string name)
      : IterDataPipe<U>(std::move(name)), source_(source.ptr()), step_(std::move(step)), skipper_(policy) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<SkipOnError>(*this); }

  /// The elements skipped in this epoch.
  [[nodiscard]] std::uint64_t skipped() const noexcept { return skipper_.skipped(); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("index", index_);
    skipper_.save(writer);
    pending_.save(writer, "pending", *this);
    return true;
  }
  void load_state(const StateReader& reader) override {
    index_ = reader.read<std::uint64_t>("index");
    skipper_.load(reader);
    pending_.load(reader, "pending", *this);
  }

 protected:
  void reset_impl() override {
    index_ = 0;
    skipper_.reset();
    pending_.clear();
    source_.reset();
  }

  std::optional<U> next_impl() override {
    single_->clear();
    if (pull_impl(*single_, 1) == 0) return std::nullopt;
    return std::optional<U>(std::move(single_->front()));
  }

  std::size_t pull_impl(std::vector<U>& out, std::size_t n) override {
    const std::size_t first = out.size();
    pending_.take_into(out, n);
    while (out.size() - first < n) {
      const std::size_t wanted = std::min(n - (out.size() - first), kMaxRead);
      staging_->clear();
      std::size_t got = 0;
      std::exception_ptr upstream_failure;
      try {
        got = source_.pull(*staging_, wanted);
      } catch (...) {
        upstream_failure = std::current_exception();  // what it appended before failing comes first
      }
      for (auto& element : *staging_) apply(std::move(element), out);
      staging_->clear();
      if (upstream_failure) std::rethrow_exception(upstream_failure);
      if (got < wanted) break;
    }
    // A flatmap's expansion may overshoot the request: the rest waits for the next call.
    if (out.size() - first > n) {
      auto& rest = pending_.refill();
      const auto surplus = out.begin() + static_cast<std::ptrdiff_t>(first + n);
      rest.assign(std::make_move_iterator(surplus), std::make_move_iterator(out.end()));
      out.erase(surplus, out.end());
    }
    return out.size() - first;
  }

 private:
  /// Appends what `element` becomes, or nothing when the step throws and the policy skips it.
  void apply(T&& element, std::vector<U>& out) {
    const std::size_t before = out.size();
    try {
      step_(std::move(element), out);
    } catch (...) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
      skipper_.skip_current_or_throw(*this, index_++);
      this->count_skipped();
      return;
    }
    ++index_;
  }

  Input<T> source_;
  Step step_;
  detail::ElementSkipper skipper_;
  std::uint64_t index_ = 0;                         // input elements of this epoch the step has been applied to
  detail::Pending<U> pending_;                      // outputs beyond the last request
  detail::IterationLocal<std::vector<T>> staging_;  // reused between pulls; empty between calls
  detail::IterationLocal<std::vector<U>> single_;   // next_impl's buffer
};

/// A SkipOnError node applying `step` to `source`'s elements under `policy`, named `name`.
template <class U, class T, class Step>
IterPipe<U> make_skipping(const IterPipe<T>& source, Step step, OnError policy, std::string_view name) {
  return IterPipe<U>(std::make_shared<SkipOnError<T, U, Step>>(source, std::move(step), policy, std::string(name)));
}

}  // namespace dpipe::iter

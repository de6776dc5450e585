#pragma once
/// \file
/// GlobalStepBatcher: groups a global-order stream into one vector per step of its instance, an
/// empty one for a step whose elements were all filtered out, so that every instance yields
/// exactly one element per step it owns and a merge in turn restores the global order. Built by
/// the global pipe's batch() and in_order() (<dpipe/global/global_pipe.hpp>).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/global/global_epoch.hpp>
#include <dpipe/global/sampled.hpp>
#include <dpipe/global/schedule.hpp>

namespace dpipe {
namespace detail {

/// The schedule of the global order's sampler upstream of `input`; InvalidArgument when there is
/// none, or more than one.
[[nodiscard]] GlobalSchedule upstream_schedule(const DataPipePtr& input, const std::string& label);

/// Throws the internal error of an element that arrives after its step was yielded.
[[noreturn]] void throw_step_out_of_order(const std::string& label, std::uint64_t got, std::uint64_t expected);

}  // namespace detail

/// Yields Sampled<vector<T>>{step, ...} for each step its instance owns, in order, holding the
/// elements of that step. Thread-safety: one thread iterates at a time.
template <class T>
class GlobalStepBatcher final : public IterDataPipe<Sampled<std::vector<T>>> {
 public:
  static constexpr std::string_view kName = "global_steps";

  explicit GlobalStepBatcher(const IterPipe<Sampled<T>>& source)
      : IterDataPipe<Sampled<std::vector<T>>>(std::string(kName)), source_(source.ptr()) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<GlobalStepBatcher>(*this); }

 protected:
  void reset_impl() override {
    source_.reset();
    schedule_ = detail::upstream_schedule(source_.target(), this->label());
    step_ = 0;
    staged_.clear();
    cursor_ = 0;
    source_ended_ = false;
  }

  std::optional<Sampled<std::vector<T>>> next_impl() override {
    if (step_ >= schedule_.owned_steps()) return std::nullopt;
    const std::uint64_t step = schedule_.owned_step(step_++);
    Sampled<std::vector<T>> batch{step, 0, 0, {}};
    batch.value.reserve(static_cast<std::size_t>(schedule_.span()));
    while (true) {
      if (cursor_ == staged_.size() && !refill()) break;
      Sampled<T>& element = staged_[cursor_];
      if (element.step != step) {
        if (element.step < step) detail::throw_step_out_of_order(this->label(), element.step, step);
        break;
      }
      batch.value.push_back(std::move(element.value));
      ++cursor_;
    }
    return batch;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    return static_cast<std::size_t>(detail::upstream_schedule(source_.target(), this->label()).owned_steps());
  }

 private:
  /// Reads the next elements of the source into the staging area; false when it has no more.
  bool refill() {
    staged_.clear();
    cursor_ = 0;
    if (source_ended_) return false;
    const std::size_t wanted = static_cast<std::size_t>(std::max<std::uint64_t>(schedule_.span(), 16));
    if (source_.pull(staged_, wanted) < wanted) source_ended_ = true;
    return !staged_.empty();
  }

  Input<Sampled<T>> source_;
  GlobalSchedule schedule_;
  std::uint64_t step_ = 0;          // the instance's next step (an index into its owned steps)
  std::vector<Sampled<T>> staged_;  // read from the source, from cursor_ on not yet batched
  std::size_t cursor_ = 0;
  bool source_ended_ = false;
};

}  // namespace dpipe

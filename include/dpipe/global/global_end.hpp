#pragma once
/// \file
/// GlobalOrderOut: the end of a global-order pipeline. It stays in the trainer's process (it is not
/// replicable), reads the instances' steps in global order (a reading service merges its workers
/// in turn, which is that order) and yields either each step's element (a batch) or the elements
/// of each step one by one. It remembers where the global stream stands after each element it
/// yielded, so that a checkpoint records the position the trainer reached.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/global/global_epoch.hpp>
#include <dpipe/global/sampled.hpp>

namespace dpipe {
namespace detail {

/// The part of the end that does not depend on the element type: the epoch, the world size, and
/// the positions after the last elements yielded. Thread-safety: none.
class GlobalEndState {
 public:
  /// How many elements back position_after() reaches: beyond what the loader and a prefetch read ahead.
  static constexpr std::size_t kRemembered = 4096;

  void set_epoch(const GlobalEpoch& epoch) noexcept { epoch_ = epoch; }
  [[nodiscard]] const std::optional<GlobalEpoch>& epoch() const noexcept { return epoch_; }
  void resume_at(GlobalPosition position, std::uint64_t handed_out) { resume_ = Resume{position, handed_out}; }

  /// A new iteration: the first after resume_at() continues there.
  void start();
  /// Step `step` begins: returns how many of its elements a restored position had delivered
  /// already, which the end skips (0 but for the resume position's step).
  [[nodiscard]] std::uint64_t begin_step(std::uint64_t step) noexcept;
  /// A whole step was consumed (its elements yielded or skipped).
  void step_done() noexcept {
    ++steps_;
    offset_ = 0;
  }
  /// An element of the current step was yielded; `step_complete`: it was the step's last.
  void yielded(bool step_complete) noexcept;
  [[nodiscard]] GlobalPosition position_after(std::uint64_t handed_out, const std::string& label) const;

 private:
  struct Resume {
    GlobalPosition position;
    std::uint64_t handed_out = 0;
  };
  struct Local {
    std::uint64_t steps = 0;   // this rank's steps consumed since the iteration started
    std::uint64_t offset = 0;  // elements of the next step yielded
  };
  void remember() noexcept { remembered_[count_ % kRemembered] = Local{steps_, offset_}; }
  [[nodiscard]] std::uint64_t start_step() const noexcept { return epoch_ ? epoch_->start_step : 0; }

  std::optional<GlobalEpoch> epoch_;
  std::optional<Resume> resume_;
  std::optional<GlobalPosition> skip_;  // the restored position whose offset the first record skips
  std::uint64_t steps_ = 0;
  std::uint64_t offset_ = 0;
  std::uint64_t count_ = 0;  // elements yielded in the epoch (restored ones included)
  std::uint64_t first_ = 0;  // count_ when the iteration started
  std::array<Local, kRemembered> remembered_{};
};

}  // namespace detail

/// Yields `Out` from the instances' Sampled<X> steps: X itself when `kFlatten` is false (one
/// element per step: a batch), else the elements of X (a vector) one by one.
/// Thread-safety: one thread iterates at a time.
template <class X, bool kFlatten>
class GlobalOrderOut final : public IterDataPipe<std::conditional_t<kFlatten, typename X::value_type, X>>,
                             public GlobalOrderEnd {
 public:
  using Out = std::conditional_t<kFlatten, typename X::value_type, X>;
  static constexpr std::string_view kName = "global_order_out";

  explicit GlobalOrderOut(const IterPipe<Sampled<X>>& source)
      : IterDataPipe<Out>(std::string(kName)),
        source_(source.ptr()),
        state_(std::make_unique<detail::GlobalEndState>()) {
    this->set_replicable(false);
  }
  GlobalOrderOut(const GlobalOrderOut& other)
      : IterDataPipe<Out>(other),
        GlobalOrderEnd(other),
        source_(other.source_),
        state_(std::make_unique<detail::GlobalEndState>(*other.state_)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<GlobalOrderOut>(*this); }

  void set_global_epoch(const GlobalEpoch& epoch) override { state_->set_epoch(epoch); }
  [[nodiscard]] std::optional<GlobalEpoch> global_epoch() const override { return state_->epoch(); }
  [[nodiscard]] GlobalPosition position_after(std::uint64_t handed_out) const override {
    return state_->position_after(handed_out, this->label());
  }
  void resume_at(GlobalPosition position, std::uint64_t handed_out) override {
    state_->resume_at(position, handed_out);
  }

 protected:
  void reset_impl() override {
    source_.reset();
    current_.reset();
    at_ = 0;
    state_->start();
  }

  std::optional<Out> next_impl() override {
    if constexpr (kFlatten) {
      while (!current_ || at_ == current_->value.size()) {
        current_ = source_.next();
        if (!current_) return std::nullopt;
        at_ = std::min<std::size_t>(state_->begin_step(current_->step), current_->value.size());
        if (at_ == current_->value.size()) state_->step_done();
      }
      Out element = std::move(current_->value[at_++]);
      const bool complete = at_ == current_->value.size();
      state_->yielded(complete);
      return element;
    } else {
      auto step = source_.next();
      if (!step) return std::nullopt;
      state_->yielded(true);
      return std::move(step->value);
    }
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    if constexpr (kFlatten) {
      return std::nullopt;
    } else {
      return source_.length();
    }
  }

 private:
  Input<Sampled<X>> source_;
  std::unique_ptr<detail::GlobalEndState> state_;  // on the heap: it remembers kRemembered positions
  std::optional<Sampled<X>> current_;              // the step being handed out (kFlatten)
  std::size_t at_ = 0;                             // its next element
};

}  // namespace dpipe

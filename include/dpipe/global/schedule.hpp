#pragma once
/// \file
/// GlobalSchedule: which global steps one instance of a global-order pipeline handles, and which
/// positions each step spans. Pure arithmetic, the same in every process.

#include <cstddef>
#include <cstdint>
#include <utility>

namespace dpipe {

/// What the ranks do with the steps at an epoch's end that do not make a round of one step per
/// rank: drop them (the default, as fullsync does), or pad the round with the epoch's first steps
/// again. Every rank yields the same number of steps either way.
enum class EpochTail : std::uint8_t { kDrop, kPad };

/// Where one instance stands in the job: rank `rank` of `world`, worker `worker` of `workers`.
struct GlobalLayout {
  std::uint64_t world = 1;
  std::uint64_t rank = 0;
  std::uint64_t workers = 1;
  std::uint64_t worker = 0;
};

/// The epoch's global stream is a sequence of steps; step s spans positions [s * span, s * span +
/// span) of [0, size). Counting from `start_step` (0, or where a restore continues), the steps are
/// dealt to the ranks in turn (rank r: start + r, start + r + world, ...), and a rank's steps to its
/// workers in turn. Thread-safety: immutable.
class GlobalSchedule {
 public:
  GlobalSchedule() = default;
  GlobalSchedule(std::uint64_t size, std::uint64_t span, bool drop_last, EpochTail tail, GlobalLayout layout,
                 std::uint64_t start_step);

  /// The steps of the whole epoch.
  [[nodiscard]] std::uint64_t total_steps() const noexcept { return total_; }
  /// The steps each rank yields from the start step on.
  [[nodiscard]] std::uint64_t rank_steps() const noexcept { return rank_steps_; }
  /// The steps this instance handles.
  [[nodiscard]] std::uint64_t owned_steps() const noexcept;
  /// The global step of this instance's k-th step (k < owned_steps()).
  [[nodiscard]] std::uint64_t owned_step(std::uint64_t k) const noexcept {
    return start_ + layout_.rank + (layout_.worker + k * layout_.workers) * layout_.world;
  }
  /// The positions [first, second) step `step` spans (a padded step wraps to the epoch's start).
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> positions(std::uint64_t step) const noexcept;
  /// The number of positions of this instance's steps.
  [[nodiscard]] std::uint64_t owned_positions() const noexcept;

  [[nodiscard]] std::uint64_t span() const noexcept { return span_; }

 private:
  std::uint64_t size_ = 0;
  std::uint64_t span_ = 1;
  std::uint64_t total_ = 0;
  std::uint64_t start_ = 0;
  std::uint64_t rank_steps_ = 0;
  GlobalLayout layout_;
};

}  // namespace dpipe

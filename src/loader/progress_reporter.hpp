#pragma once
// ProgressReporter: what DataLoader2::report_progress() switches on.

#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/loader/progress.hpp>

namespace dpipe::detail {

/// Counts the elements a loader hands out and reports at an interval. Thread-safety: the loader's
/// thread only.
class ProgressReporter {
 public:
  ProgressReporter(ProgressOptions options, std::optional<std::size_t> epoch_length);

  /// Epoch `epoch` starts (or resumes) on `root` with `taken` elements handed out.
  void epoch_started(const DataPipePtr& root, std::uint64_t epoch, std::uint64_t taken);
  /// The loader handed out `count` more elements, `taken` in the epoch so far: an addition and a
  /// compare, and a clock read about 64 times per interval.
  void handed_out(const DataPipePtr& root, std::uint64_t taken, std::uint64_t count) {
    since_check_ += count;
    if (since_check_ < check_every_) return;
    check(root, taken);
  }
  /// The epoch ended after `taken` elements: the report of the whole epoch.
  void epoch_ended(const DataPipePtr& root, std::uint64_t taken);
  /// Switches off the node counting epoch_started() switched on.
  void stop(const DataPipePtr& root) const;

 private:
  using Clock = std::chrono::steady_clock;

  void check(const DataPipePtr& root, std::uint64_t taken);
  void report(const DataPipePtr& root, std::uint64_t taken, bool ended, Clock::time_point now);
  /// The nodes' own time since the previous report (since the epoch started when `whole_epoch`).
  std::vector<NodeTime> node_times(const DataPipePtr& root, bool whole_epoch, std::chrono::nanoseconds span);

  ProgressOptions options_;
  std::optional<std::size_t> epoch_length_;
  std::uint64_t epoch_ = 0;
  Clock::time_point epoch_start_;
  std::uint64_t epoch_start_taken_ = 0;
  Clock::time_point last_report_;
  std::uint64_t last_report_taken_ = 0;
  Clock::time_point last_check_;
  std::uint64_t since_check_ = 0;
  std::uint64_t check_every_ = 1;                        // elements between two clock reads
  std::unordered_map<std::uint64_t, std::int64_t> own_;  // node id -> own nanoseconds at the last report
};

}  // namespace dpipe::detail

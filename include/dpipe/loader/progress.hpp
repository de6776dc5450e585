#pragma once
/// \file
/// Progress reports of a DataLoader2 (DataLoader2::report_progress): how fast elements reach the
/// trainer, where the epoch stands and which nodes of this process take the time, at an interval.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dpipe {

/// A node's own time (its inputs' not included) over the span of a report.
struct NodeTime {
  std::string label;  // "map#4"
  std::chrono::nanoseconds own{0};
  double share = 0;  // of the span's wall-clock time; nodes on other threads overlap it
};

/// One progress report.
struct ProgressReport {
  std::uint64_t epoch = 0;     // the epoch running, 1 for the first
  std::uint64_t elements = 0;  // elements handed to the trainer in it so far
  /// Elements the epoch yields (DataLoader2::epoch_length()), when known.
  std::optional<std::size_t> epoch_length;
  /// The last report of an epoch, at its end: the span is then the whole epoch (since it started
  /// or, for a restored one, since it resumed).
  bool epoch_ended = false;
  std::chrono::nanoseconds span{0};      // the time the report covers: since the previous one
  double elements_per_second = 0;        // over the span
  std::chrono::nanoseconds in_epoch{0};  // since the epoch started (or resumed)
  /// The nodes of this process that took the most own time over the span, most first (at most
  /// five); empty unless ProgressOptions::node_times. With worker processes, the workers' nodes
  /// are not among them: the time the trainer waits for the workers is merge_workers' own.
  std::vector<NodeTime> node_times;
};

/// The line the default reporter logs: "DataLoader2: epoch 2: 1500 of 6000 elements (25.0%),
/// 9761 elements/s over 0.2 s, 0.3 s into the epoch; own time: map#3 72%, batch#5 4%".
[[nodiscard]] std::string format_progress(const ProgressReport& report);

/// What DataLoader2::report_progress() reports, and where.
struct ProgressOptions {
  /// The time between two reports (the clock is read about 64 times per interval, not per element).
  std::chrono::milliseconds interval{std::chrono::seconds(30)};
  /// Count the own time of every node of this process (graph::enable_statistics: two clock reads
  /// per call of each node) and report the nodes that take the most.
  bool node_times = true;
  /// Receives each report, on the thread that iterates the loader. Empty: log format_progress()
  /// at info level on dpipe's logger, which report_progress() then lowers to info if it was above
  /// (the default is warn; dpipe logs nothing else at info).
  std::function<void(const ProgressReport&)> on_report;
};

}  // namespace dpipe

// Progress reports of DataLoader2.

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/graph/background.hpp>
#include <dpipe/graph/statistics.hpp>

#include "loader/progress_reporter.hpp"

namespace dpipe {
namespace {

constexpr std::size_t kMostNodes = 5;
constexpr std::uint64_t kMostElementsBetweenChecks = std::uint64_t{1} << 20;

double seconds(std::chrono::nanoseconds span) { return std::chrono::duration<double>(span).count(); }

}  // namespace

std::string format_progress(const ProgressReport& report) {
  std::string line =
      fmt::format("DataLoader2: epoch {}{}: {}", report.epoch, report.epoch_ended ? " ended" : "", report.elements);
  if (report.epoch_length && *report.epoch_length > 0) {
    line += fmt::format(" of {} elements ({:.1f}%)", *report.epoch_length,
                        100.0 * static_cast<double>(report.elements) / static_cast<double>(*report.epoch_length));
  } else {
    line += " elements";
  }
  line += fmt::format(", {:.0f} elements/s over {:.1f} s", report.elements_per_second, seconds(report.span));
  if (!report.epoch_ended) line += fmt::format(", {:.1f} s into the epoch", seconds(report.in_epoch));
  if (!report.node_times.empty()) {
    line += "; own time:";
    for (std::size_t i = 0; i < report.node_times.size(); ++i) {
      line += fmt::format("{} {} {:.0f}%", i == 0 ? "" : ",", report.node_times[i].label,
                          100.0 * report.node_times[i].share);
    }
  }
  return line;
}

namespace detail {

ProgressReporter::ProgressReporter(ProgressOptions options, std::optional<std::size_t> epoch_length)
    : options_(std::move(options)), epoch_length_(epoch_length) {
  if (options_.interval <= std::chrono::milliseconds(0)) {
    DPIPE_THROW(InvalidArgument, "report_progress: the interval must be positive, got {} ms",
                options_.interval.count());
  }
  if (!options_.on_report && !logger()->should_log(spdlog::level::info)) logger()->set_level(spdlog::level::info);
}

void ProgressReporter::epoch_started(const DataPipePtr& root, std::uint64_t epoch, std::uint64_t taken) {
  if (options_.node_times) graph::enable_statistics(root);  // from zero
  own_.clear();
  epoch_ = epoch;
  epoch_start_ = last_report_ = last_check_ = Clock::now();
  epoch_start_taken_ = last_report_taken_ = taken;
  since_check_ = 0;
}

void ProgressReporter::epoch_ended(const DataPipePtr& root, std::uint64_t taken) {
  report(root, taken, true, Clock::now());
}

void ProgressReporter::stop(const DataPipePtr& root) const {
  if (options_.node_times) graph::enable_statistics(root, false);
}

void ProgressReporter::check(const DataPipePtr& root, std::uint64_t taken) {
  since_check_ = 0;
  const auto now = Clock::now();
  const auto since = now - last_check_;
  last_check_ = now;
  // About 64 clock reads per interval, whatever the rate.
  if (since < options_.interval / 64 && check_every_ < kMostElementsBetweenChecks) {
    check_every_ *= 2;
  } else if (since > options_.interval / 16 && check_every_ > 1) {
    check_every_ /= 2;
  }
  if (now - last_report_ >= options_.interval) report(root, taken, false, now);
}

void ProgressReporter::report(const DataPipePtr& root, std::uint64_t taken, bool ended, Clock::time_point now) {
  ProgressReport report;
  report.epoch = epoch_;
  report.elements = taken;
  report.epoch_length = epoch_length_;
  report.epoch_ended = ended;
  report.span = now - (ended ? epoch_start_ : last_report_);
  report.in_epoch = now - epoch_start_;
  const auto counted = taken - (ended ? epoch_start_taken_ : last_report_taken_);
  if (report.span.count() > 0) report.elements_per_second = static_cast<double>(counted) / seconds(report.span);
  if (options_.node_times) report.node_times = node_times(root, ended, report.span);
  last_report_ = now;
  last_report_taken_ = taken;
  if (options_.on_report) {
    options_.on_report(report);
  } else {
    logger()->info("{}", format_progress(report));
  }
}

std::vector<NodeTime> ProgressReporter::node_times(const DataPipePtr& root, bool whole_epoch,
                                                   std::chrono::nanoseconds span) {
  std::vector<graph::NodeStatistics> rows;
  {
    const graph::BackgroundStop stopped(root);  // the counters of nodes on a thread are read after it stopped
    rows = graph::statistics(root);
  }
  std::vector<NodeTime> times;
  for (const auto& row : rows) {
    const std::int64_t own = row.exclusive.count();
    auto& before = own_[row.id];
    const std::int64_t in_span = whole_epoch ? own : own - before;
    before = own;
    if (in_span <= 0) continue;
    times.push_back(
        NodeTime{row.label, std::chrono::nanoseconds(in_span),
                 span.count() > 0 ? static_cast<double>(in_span) / static_cast<double>(span.count()) : 0.0});
  }
  std::stable_sort(times.begin(), times.end(), [](const NodeTime& a, const NodeTime& b) { return a.own > b.own; });
  if (times.size() > kMostNodes) times.resize(kMostNodes);
  return times;
}

}  // namespace detail
}  // namespace dpipe

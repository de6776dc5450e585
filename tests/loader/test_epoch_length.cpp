// DataLoader2::epoch_length() for each reading service and worker count, and the progress
// reporter (DataLoader2::report_progress).

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::DataLoader2;
using dpipe::MultiProcessingOptions;
using dpipe::MultiProcessingReadingService;
using dpipe::testing::epoch;
using dpipe::testing::LogCapture;
using dpipe::testing::range;
using dpipe::testing::workers;
using Batch = std::vector<int>;

/// 100 shuffled, sharded ids in batches of 32 (or only full ones).
dpipe::IterPipe<Batch> batches(bool drop_last = false) {
  return iter::from(range(100)).shuffle().sharding_filter().batch(32, drop_last);
}

/// The loader's epoch_length(), checked against the number of elements an epoch really yields.
template <class T>
std::optional<std::size_t> checked_length(DataLoader2<T>& loader) {
  const auto length = loader.epoch_length();
  INFO("epoch_length " << (length ? std::to_string(*length) : "unknown"));
  if (length) CHECK(epoch(loader).size() == *length);
  return length;
}

TEST_CASE("epoch_length: in process the pipeline's length / unknown after a filter", "[loader][epoch_length]") {
  DataLoader2<Batch> plain(batches());
  CHECK(checked_length(plain) == 4);  // 32 32 32 4
  DataLoader2<Batch> in_process(batches(true), dpipe::InProcessReadingService());
  CHECK(checked_length(in_process) == 3);
  DataLoader2<int> filtered(iter::from(range(10)).filter([](int x) { return x % 2 == 0; }));
  CHECK(filtered.epoch_length() == std::nullopt);
  const auto init = [](dpipe::DataPipePtr graph, const dpipe::WorkerInfo&) { return graph; };
  DataLoader2<Batch> reshaped(batches(), dpipe::InProcessReadingService(0, init));
  CHECK(reshaped.epoch_length() == std::nullopt);  // an init function may reshape the graph
}

TEST_CASE("epoch_length: with workers each shard ends in its own short batch", "[loader][mp][epoch_length]") {
  const LogCapture quiet;
  // 2 workers: 50 ids each, batches of 32 and 18.
  DataLoader2<Batch> two(batches(), workers(2));
  CHECK(checked_length(two) == 4);
  // 3 workers: 34, 33 and 33 ids: two batches each, where the pipeline in process yields four.
  DataLoader2<Batch> three(batches(), workers(3));
  CHECK(checked_length(three) == 6);
  DataLoader2<Batch> three_full(batches(true), workers(3));
  CHECK(checked_length(three_full) == 3);
  DataLoader2<int> unbatched(iter::from(range(100)).shuffle().sharding_filter(), workers(3));
  CHECK(checked_length(unbatched) == 100);
}

TEST_CASE("epoch_length: is worked out without starting the workers", "[loader][mp][epoch_length]") {
  DataLoader2<Batch> loader(batches(), workers(2));
  CHECK(loader.epoch_length() == 4);
  const auto& service = dynamic_cast<const MultiProcessingReadingService&>(*loader.reading_service());
  CHECK(service.worker_pids().empty());
}

TEST_CASE("epoch_length: a dispatching process deals round robin / a batch in the main process",
          "[loader][mp][epoch_length]") {
  const LogCapture quiet;
  // 10 ids dealt to 3 workers (4, 3, 3), each batching by 2: 2 + 2 + 2 batches.
  auto dealt = iter::from(range(10)).sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing).batch(2);
  DataLoader2<Batch> dispatched(dealt, workers(3));
  CHECK(checked_length(dispatched) == 6);
  // A batch that stays in the main process batches the merged 100 ids: 40 40 20.
  auto main_batch = iter::from(range(100)).shuffle().sharding_filter().batch(40);
  main_batch.node().set_replicable(false);
  DataLoader2<Batch> merged(main_batch, workers(2));
  CHECK(checked_length(merged) == 3);
  MultiProcessingOptions options{.num_workers = 2};
  options.worker_init_fn = [](dpipe::DataPipePtr graph, const dpipe::WorkerInfo&) { return graph; };
  DataLoader2<Batch> reshaped(batches(), MultiProcessingReadingService(options));
  CHECK(reshaped.epoch_length() == std::nullopt);
}

/// A pipeline of 400 ids whose map spends 2 ms on every 50th, so that reports at a 1 ms interval
/// must happen (the reporter reads the clock whenever an element follows a slow one).
dpipe::IterPipe<int> slow_every_50th() {
  return iter::from(range(400)).sharding_filter().map([](int x) {
    if (x % 50 == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    return x;
  });
}

dpipe::ProgressOptions collect_into(std::vector<dpipe::ProgressReport>& reports) {
  dpipe::ProgressOptions options;
  options.interval = std::chrono::milliseconds(1);
  options.on_report = [&reports](const dpipe::ProgressReport& report) { reports.push_back(report); };
  return options;
}

TEST_CASE("report_progress: reports during the epoch and once at its end / a bad interval / stops when asked",
          "[loader][progress]") {
  const LogCapture quiet;
  DataLoader2<int> loader(slow_every_50th());
  std::vector<dpipe::ProgressReport> reports;
  loader.report_progress(collect_into(reports));
  CHECK(epoch(loader).size() == 400);
  REQUIRE(reports.size() >= 2);
  const auto& last = reports.back();
  CHECK(last.epoch == 1);
  CHECK(last.epoch_ended);
  CHECK(last.elements == 400);
  CHECK(last.epoch_length == 400);
  CHECK(last.span == last.in_epoch);  // the epoch's report covers the whole epoch
  std::uint64_t previous = 0;
  for (std::size_t i = 0; i + 1 < reports.size(); ++i) {
    INFO("report " << i);
    CHECK_FALSE(reports[i].epoch_ended);
    CHECK(reports[i].elements > previous);
    CHECK(reports[i].elements < 400);
    CHECK(reports[i].elements_per_second > 0);
    previous = reports[i].elements;
  }
  // The map's busy waits make it the node that takes most of the time.
  REQUIRE_FALSE(last.node_times.empty());
  CHECK(last.node_times.front().label.rfind("map#", 0) == 0);
  CHECK(last.node_times.size() <= 5);

  dpipe::ProgressOptions never;
  never.interval = std::chrono::milliseconds(0);
  CHECK_THROWS_MATCHES(loader.report_progress(never), dpipe::InvalidArgument,
                       Catch::Message("report_progress: the interval must be positive, got 0 ms"));
  reports.clear();
  CHECK(epoch(loader).size() == 400);
  REQUIRE_FALSE(reports.empty());
  CHECK(reports.back().epoch == 2);  // the refused options left the reporter as it was

  loader.report_progress(std::nullopt);
  reports.clear();
  CHECK(epoch(loader).size() == 400);
  CHECK(reports.empty());
}

TEST_CASE("report_progress: the default reporter logs a line at info level", "[loader][progress]") {
  const LogCapture log;
  DataLoader2<Batch> loader(iter::from(range(64)).batch(8));
  dpipe::ProgressOptions options;
  options.node_times = false;
  loader.report_progress(options);
  CHECK(dpipe::logger()->should_log(spdlog::level::info));  // lowered from warn so that the lines show
  (void)epoch(loader);
  (void)epoch(loader);
  loader.report_progress(std::nullopt);
  dpipe::logger()->set_level(spdlog::level::warn);
  std::vector<std::string> ends;
  for (const auto& message : log.messages()) {
    if (message.find(" ended: ") != std::string::npos) ends.push_back(message.substr(0, message.find(", ")));
  }
  CHECK(ends == std::vector<std::string>{"DataLoader2: epoch 1 ended: 8 of 8 elements (100.0%)",
                                         "DataLoader2: epoch 2 ended: 8 of 8 elements (100.0%)"});
}

TEST_CASE("report_progress: the format of a report", "[loader][progress]") {
  dpipe::ProgressReport report;
  report.epoch = 2;
  report.elements = 1500;
  report.epoch_length = 6000;
  report.span = std::chrono::milliseconds(200);
  report.elements_per_second = 9761.4;
  report.in_epoch = std::chrono::milliseconds(300);
  report.node_times = {{"map#3", std::chrono::milliseconds(144), 0.72},
                       {"batch#5", std::chrono::milliseconds(8), 0.04}};
  CHECK(dpipe::format_progress(report) ==
        "DataLoader2: epoch 2: 1500 of 6000 elements (25.0%), 9761 elements/s over 0.2 s, 0.3 s into the epoch; own "
        "time: map#3 72%, batch#5 4%");
  report.epoch_ended = true;
  report.epoch_length.reset();
  report.node_times.clear();
  CHECK(dpipe::format_progress(report) == "DataLoader2: epoch 2 ended: 1500 elements, 9761 elements/s over 0.2 s");
}

TEST_CASE("report_progress: with workers / after a restore", "[loader][mp][progress]") {
  const LogCapture quiet;
  std::vector<dpipe::ProgressReport> reports;
  {
    DataLoader2<int> loader(slow_every_50th(), workers(2));
    loader.report_progress(collect_into(reports));
    CHECK(epoch(loader).size() == 400);
  }
  REQUIRE_FALSE(reports.empty());
  CHECK(reports.back().epoch_ended);
  CHECK(reports.back().elements == 400);
  CHECK(reports.back().epoch_length == 400);
  bool merge_listed = false;
  for (const auto& time : reports.back().node_times)
    merge_listed = merge_listed || time.label.rfind("merge_workers#", 0) == 0;
  CHECK(merge_listed);  // the trainer's wait for the workers

  std::vector<std::byte> state;
  {
    DataLoader2<int> loader(slow_every_50th(), workers(2));
    auto it = loader.begin();
    for (int i = 0; i < 150; ++i) ++it;
    state = loader.state_dict();
  }
  reports.clear();
  DataLoader2<int> restored(slow_every_50th(), workers(2));
  restored.load_state_dict(state);
  restored.report_progress(collect_into(reports));
  CHECK(epoch(restored).size() == 250);
  REQUIRE_FALSE(reports.empty());
  CHECK(reports.back().epoch == 1);
  CHECK(reports.back().elements == 400);  // the epoch's position counts the restored elements
}

}  // namespace

// MultiProcessingReadingService beyond the defaults: options and worker hooks, random
// augmentations that stay reproducible, a dispatching process, what a failing worker looks like,
// a picture of the split graph, the length of an epoch, progress reports, and worker threads.

#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include <dpipe/dpipe.hpp>

namespace {

std::vector<int> ids(int n) {
  std::vector<int> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

}  // namespace

int main() {
  // These small demonstrations keep their order on purpose: silence the linter's advice to
  // shuffle before sharding_filter.
  dpipe::logger()->set_level(spdlog::level::err);
  {
    // [options]
    dpipe::MultiProcessingOptions options{.num_workers = 3};
    options.worker_prefetch_cnt = 32;                   // elements each worker may have ready
    options.timeout = std::chrono::milliseconds(5000);  // TimeoutError if a worker stalls longer
    options.worker_init_fn = [](dpipe::DataPipePtr graph, const dpipe::WorkerInfo& info) {
      // Runs once in each worker, after sharding: here, tag every element with its worker.
      return dpipe::graph::as_iter<int>(graph)
          .map([worker = static_cast<int>(info.worker_id)](int x) { return x * 10 + worker; })
          .ptr();
    };
    dpipe::DataLoader2<int> loader(dpipe::iter::from(ids(9)).sharding_filter(),
                                   dpipe::MultiProcessingReadingService(options));
    // [options]
    std::printf("tagged:");
    for (int x : loader) std::printf(" %d", x);
    std::printf("\n");
  }
  {
    // [augment]
    // dpipe::worker_random() is reseeded in every worker every epoch from the loader's seed, so a
    // seeded loader augments the same way in every run.
    auto pipeline = dpipe::iter::from(ids(6)).sharding_filter().map([](int x) {
      const auto jitter = static_cast<int>(dpipe::worker_random().randbelow(100));
      return std::to_string(x) + "+" + std::to_string(jitter);
    });
    const auto run = [&] {
      dpipe::DataLoader2<std::string> loader(pipeline, dpipe::MultiProcessingReadingService({.num_workers = 2}));
      loader.seed(42);
      std::string out;
      for (const auto& sample : loader) out += sample + " ";
      return out;
    };
    const bool same = run() == run();
    // [augment]
    std::printf("augmentations reproducible: %s\n", same ? "yes" : "no");
  }
  {
    // [dispatch]
    // Everything up to sharding_round_robin_dispatch runs once, in a dispatching process that deals
    // element j to worker j mod N; the rest runs in each worker.
    auto pipeline = dpipe::iter::from(ids(8))
                        .sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing)
                        .map([](int x) { return x * x; });
    dpipe::DataLoader2<int> loader(pipeline, dpipe::MultiProcessingReadingService({.num_workers = 2}));
    // [dispatch]
    std::printf("dispatched:");
    for (int x : loader) std::printf(" %d", x);
    std::printf("\n");
    // [dot]
    // After the first iteration, which split the graph:
    const std::string dot = dynamic_cast<dpipe::MultiProcessingReadingService&>(*loader.reading_service()).to_dot();
    // [dot]
    std::printf("picture: %s", dot.substr(0, dot.find('\n') + 1).c_str());
  }
  {
    // [errors]
    auto pipeline = dpipe::iter::from(ids(100)).sharding_filter().map([](int x) {
      if (x == 7) throw std::invalid_argument("sample 7 is corrupt");
      return x;
    });
    dpipe::DataLoader2<int> loader(pipeline, dpipe::MultiProcessingReadingService({.num_workers = 2}));
    int received = 0;
    try {
      for (int x : loader) {
        (void)x;
        ++received;  // 0 .. 6 arrive first: everything before the failure, in order
      }
    } catch (const dpipe::WorkerError& error) {
      std::printf("after %d elements: %s\n", received, error.what());
    }
    // [errors]
  }
  {
    // [epoch_length]
    // 100 ids in batches of 32: in process 32 32 32 4, while each of 3 workers batches its own
    // share of 34, 33 or 33 ids into a full batch and a short one.
    auto pipeline = dpipe::iter::from(ids(100)).shuffle().sharding_filter().batch(32);
    dpipe::DataLoader2<std::vector<int>> in_process(pipeline);
    dpipe::DataLoader2<std::vector<int>> three_workers(pipeline,
                                                       dpipe::MultiProcessingReadingService({.num_workers = 3}));
    std::printf("batches per epoch: %zu in process, %zu with 3 workers\n", in_process.epoch_length().value_or(0),
                three_workers.epoch_length().value_or(0));
    // [epoch_length]
    // [progress]
    dpipe::ProgressOptions progress;
    progress.interval = std::chrono::seconds(30);  // a report every 30 s, and one at the end of each epoch
    progress.on_report = [](const dpipe::ProgressReport& report) {  // without one: a log line at info level
      if (report.epoch_ended) {
        std::printf("epoch %llu: %llu of %zu batches\n", static_cast<unsigned long long>(report.epoch),
                    static_cast<unsigned long long>(report.elements), report.epoch_length.value_or(0));
      }
    };
    three_workers.report_progress(progress);
    for (const auto& batch : three_workers) (void)batch;
    // [progress]
  }
  {
    // [threads]
    // A sample the workers make and the trainer owns: move-only, with no Serializer. Worker
    // threads move it to the loop; worker processes could not send it at all.
    struct Sample {
      int id = 0;
      std::unique_ptr<std::vector<float>> pixels;
    };
    auto pipeline = dpipe::iter::from(ids(12)).shuffle().sharding_filter().map([](int id) {
      return Sample{id, std::make_unique<std::vector<float>>(1024, 0.5F)};
    });
    dpipe::MultiProcessingOptions options{.num_workers = 2, .worker_kind = dpipe::WorkerKind::kThread};
    dpipe::DataLoader2<Sample> loader(pipeline, dpipe::MultiProcessingReadingService(options));
    loader.seed(7);
    std::vector<Sample> kept;
    for (auto& sample : loader) kept.push_back(std::move(sample));  // the very objects the workers made
    // [threads]
    // The same seed gives the same order with worker processes (of plain ids, which they can send).
    auto ids_only = dpipe::iter::from(ids(12)).shuffle().sharding_filter();
    dpipe::DataLoader2<int> processes(ids_only, dpipe::MultiProcessingReadingService({.num_workers = 2}));
    processes.seed(7);
    std::size_t position = 0;
    bool same = true;
    for (int id : processes) same = same && kept.at(position++).id == id;
    std::printf("worker threads: %zu samples kept, %s order as worker processes\n", kept.size(),
                same ? "the same" : "NOT THE SAME");
    if (!same) return 1;
  }
  return 0;
}

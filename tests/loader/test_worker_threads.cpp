// MultiProcessingReadingService with worker threads (WorkerKind::kThread): the same data in the
// same order as worker processes and as in process, elements moved and never encoded, exceptions
// that keep their type, shutdown that joins every thread, exact checkpoints interchangeable with
// the worker processes' ones. Tagged [concurrency]: they also run under ThreadSanitizer.

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/core/detail/element_handoff.hpp>  // held_bytes()

#include "support/battery.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"
#include "support/process_snapshot.hpp"

namespace dpipe_test {

/// A user exception with its own type, to see that the type survives a worker thread.
struct ThreadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A move-only element without a Serializer: it cannot cross a process boundary.
struct Tensor {
  std::unique_ptr<std::vector<float>> data;
  int id = 0;
};

}  // namespace dpipe_test

namespace {

namespace iter = dpipe::iter;
using dpipe::DataLoader2;
using dpipe::InProcessReadingService;
using dpipe::MultiProcessingOptions;
using dpipe::MultiProcessingReadingService;
using dpipe::WorkerKind;
using dpipe::testing::epoch;
using dpipe::testing::ProcessSnapshot;
using dpipe::testing::range;
using dpipe::testing::read_until;
using dpipe_test::Tensor;
using dpipe_test::ThreadError;
using Batch = std::vector<int>;

MultiProcessingReadingService worker_threads(std::size_t n, MultiProcessingOptions options = {}) {
  options.num_workers = n;
  options.worker_kind = WorkerKind::kThread;
  return MultiProcessingReadingService(options);
}

/// Balanced pipelines: their random nodes sit before the sharding point.
dpipe::IterPipe<int> sharded(int count) {
  return iter::from(range(count)).shuffle(64).sharding_filter().map([](int x) { return 3 * x + 1; });
}
dpipe::IterPipe<int> dispatched(int count) {
  return iter::from(range(count))
      .shuffle(64)
      .sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing)
      .map([](int x) { return 3 * x + 1; });
}

TEST_CASE("Worker threads: the same order as worker processes and as in process / 1-4 workers / every epoch",
          "[concurrency][threads]") {
  // A dispatching branch is seeded as torchdata seeds its dispatching process (from the shared
  // stream), not as in process: there threads and processes agree with each other.
  for (const bool dispatch : {false, true}) {
    const auto pipeline = [&] { return dispatch ? dispatched(240) : sharded(240); };
    DataLoader2<int> in_process(pipeline(), InProcessReadingService());
    in_process.seed(2024);
    std::vector<std::vector<int>> expected;
    for (int e = 0; e < 3; ++e) expected.push_back(epoch(in_process));
    CHECK(expected[0] != expected[1]);
    auto sorted = expected[0];
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted.front() == 1);
    CHECK(sorted.back() == 3 * 239 + 1);
    for (std::size_t n = 1; n <= 4; ++n) {
      INFO(n << " workers, " << (dispatch ? "a dispatching thread" : "sharding_filter"));
      DataLoader2<int> threads(pipeline(), worker_threads(n));
      DataLoader2<int> processes(pipeline(), dpipe::testing::workers(n));
      threads.seed(2024);
      processes.seed(2024);
      for (std::size_t e = 0; e < 3; ++e) {
        // The processes fork before any worker thread runs: see the restore test below.
        const auto from_processes = epoch(processes);
        const auto from_threads = epoch(threads);
        if (!dispatch) CHECK(from_threads == expected[e]);
        CHECK(from_threads == from_processes);
      }
    }
  }
}

TEST_CASE("Worker threads: uneven shards merge cyclically without loss / as worker processes merge them",
          "[concurrency][threads]") {
  // Worker w of 3 receives i with i % 3 == w; the filter keeps 5 of worker 0's, 1 of worker 1's
  // and 3 of worker 2's. The merge takes one per live worker in turn.
  const auto pipeline = [] {
    return iter::from(range(30)).sharding_filter().filter([](int x) {
      const std::set<int> keep{0, 3, 6, 9, 12, 4, 2, 5, 8};
      return keep.contains(x);
    });
  };
  const std::vector<int> expected{0, 4, 2, 3, 5, 6, 8, 9, 12};
  for (const std::size_t prefetch : {0U, 1U, 10U}) {
    INFO("prefetch " << prefetch);
    MultiProcessingOptions options;
    options.worker_prefetch_cnt = prefetch;
    options.main_prefetch_cnt = prefetch;
    DataLoader2<int> threads(pipeline(), worker_threads(3, options));
    CHECK(epoch(threads) == expected);
    CHECK(epoch(threads) == expected);
  }
  DataLoader2<int> processes(pipeline(), dpipe::testing::workers(3));
  CHECK(epoch(processes) == expected);
}

TEST_CASE(
    "Worker threads: move-only elements without a Serializer are moved / the trainer gets the objects the "
    "workers made",
    "[concurrency][threads]") {
  auto made = std::make_shared<std::set<const std::vector<float>*>>();
  auto made_mutex = std::make_shared<std::mutex>();
  auto pipe = iter::from(range(64)).sharding_filter().map([made, made_mutex](int x) {
    Tensor tensor{std::make_unique<std::vector<float>>(4, static_cast<float>(x)), x};
    const std::lock_guard lock(*made_mutex);
    made->insert(tensor.data.get());
    return tensor;
  });
  DataLoader2<Tensor> loader(pipe, worker_threads(2));
  for (int e = 0; e < 2; ++e) {
    std::vector<int> ids;
    for (auto& tensor : loader) {
      ids.push_back(tensor.id);
      CHECK(*tensor.data == std::vector<float>(4, static_cast<float>(tensor.id)));
      const std::lock_guard lock(*made_mutex);
      CHECK(made->contains(tensor.data.get()));  // the very vector the map made: nothing was copied
    }
    CHECK(ids == range(64));
  }
  // Worker processes would have to encode it.
  DataLoader2<Tensor> processes(pipe, dpipe::testing::workers(2));
  CHECK_THROWS_AS(processes.begin(), dpipe::InvalidArgument);
}

TEST_CASE("Worker threads: a user exception reaches the loop as itself / after the elements before it",
          "[concurrency][threads][faults]") {
  // In the workers: worker 1 of 2 throws on 7, its fourth element; the merge hands out 0 .. 6 first.
  auto in_workers = iter::from(range(20)).sharding_filter().map([](int x) {
    if (x == 7) throw ThreadError("bad element 7");
    return x;
  });
  DataLoader2<int> loader(in_workers, worker_threads(2));
  ThreadError error("");
  CHECK(read_until(loader, error) == range(7));
  CHECK(std::string(error.what()) == "bad element 7");

  // In the dispatching thread: the source throws after dealing 0 .. 4.
  auto in_dispatcher = iter::from(range(20))
                           .map([](int x) {
                             if (x == 5) throw ThreadError("bad source 5");
                             return x;
                           })
                           .sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing);
  DataLoader2<int> dispatching(in_dispatcher, worker_threads(2));
  CHECK(read_until(dispatching, error) == range(5));
  CHECK(std::string(error.what()) == "bad source 5");
}

TEST_CASE("Worker threads: shutdown mid-epoch / after an epoch / while paused joins every thread",
          "[concurrency][threads][faults]") {
  // A sanitizer starts a thread of its own with the program's first thread: have it now.
  std::thread([] {}).join();
  const auto before = ProcessSnapshot::take();
  for (const bool dispatch : {false, true}) {
    for (int scenario = 0; scenario < 3; ++scenario) {
      INFO((dispatch ? "with" : "without") << " a dispatching thread, scenario " << scenario);
      {
        DataLoader2<int> loader(dispatch ? dispatched(1000) : sharded(1000), worker_threads(2));
        std::vector<int> got;
        for (auto& x : loader) {
          got.push_back(x);
          if (scenario == 0 && got.size() == 10) break;
          if (scenario == 2 && got.size() == 10) loader.pause();
        }
        CHECK(got.size() == (scenario == 1 ? 1000U : 10U));
        CHECK(ProcessSnapshot::take().threads == before.threads + (dispatch ? 3 : 2));
      }
      const auto after = ProcessSnapshot::take();
      CHECK(after.threads == before.threads);
      CHECK(after.children == before.children);
      CHECK(after.descriptors == before.descriptors);
    }
  }
}

TEST_CASE("Worker threads: a stall longer than the timeout raises TimeoutError naming the thread / detaches it",
          "[concurrency][threads][faults]") {
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  MultiProcessingOptions options;
  options.timeout = std::chrono::milliseconds(300);
  auto pipe = iter::from(range(20)).sharding_filter().map([released](int x) {
    if (x == 5) {
      released.wait();                       // worker 1 is stuck in user code until the test releases it...
      throw std::runtime_error("released");  // ...and then makes nothing more for a loader that is gone
    }
    return x;
  });
  dpipe::testing::LogCapture log;
  DataLoader2<int> loader(pipe, worker_threads(2, options));
  dpipe::TimeoutError error("");
  CHECK(read_until(loader, error) == range(5));
  CHECK_THAT(std::string(error.what()),
             Catch::Matches("MultiProcessingReadingService: worker thread 1 sent nothing for 300 ms \\(the "
                            "timeout\\); it has been running its pipeline for [0-9.]+ m?s: a user function may "
                            "be stuck"));
  // The loader shut down at the error: a thread cannot be killed, so the stuck one was left running
  // (with what it uses) instead of making the error wait for it.
  const auto messages = log.messages();
  CHECK(std::find(messages.begin(), messages.end(),
                  "MultiProcessingReadingService: worker thread 1 did not stop (a user function may be stuck); it is "
                  "left running detached, since a thread cannot be killed") != messages.end());
  release->set_value();  // it then sees the stop and ends on its own
}

/// A pipeline whose workers batch their own shard; with `dispatch`, a dispatching branch deals.
dpipe::IterPipe<Batch> checkpointed(bool dispatch) {
  auto source = iter::from(range(120)).shuffle(16);
  auto spread =
      dispatch ? dpipe::IterPipe<int>(source.sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing))
               : dpipe::IterPipe<int>(source.sharding_filter());
  return spread.map([](int x) { return 7 * x + 2; }).batch(4);
}

TEST_CASE("Worker threads: restored at every position it continues exactly / the next epoch too",
          "[concurrency][threads][checkpoint]") {
  struct Setup {
    std::size_t workers;
    bool dispatch;
  };
  for (const Setup setup : {Setup{1, false}, Setup{2, false}, Setup{2, true}}) {
    INFO(setup.workers << " worker threads" << (setup.dispatch ? " and a dispatching thread" : ""));
    const auto first = dpipe::testing::check_restore_sweep(
        [&] { return DataLoader2<Batch>(checkpointed(setup.dispatch), worker_threads(setup.workers)); });
    CHECK(first.size() >= 30);
  }
}

TEST_CASE(
    "Worker threads: a checkpoint of worker threads restores with worker processes / and back / without "
    "replaying",
    "[concurrency][threads][checkpoint]") {
  for (const bool dispatch : {false, true}) {
    for (const bool from_threads : {true, false}) {
      INFO((from_threads ? "threads to processes" : "processes to threads")
           << (dispatch ? " with a dispatching branch" : ""));
      const auto make = [&](bool threads) {
        return DataLoader2<Batch>(checkpointed(dispatch), threads ? worker_threads(2) : dpipe::testing::workers(2));
      };
      // The reference is gone before the worker processes fork: a fork while another thread is in
      // the allocator can leave the child holding its lock under ASan (GCC 12's libasan takes no
      // locks around fork), and worker threads that sent their last element still run briefly.
      const auto [first, second] = [&] {
        auto reference = make(from_threads);
        reference.seed(9);
        auto first_epoch = epoch(reference);
        return std::pair{std::move(first_epoch), epoch(reference)};
      }();
      for (const std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{4}, std::size_t{17}, first.size()}) {
        INFO("saved after " << k);
        std::vector<std::byte> state;
        {
          auto saving = make(from_threads);
          saving.seed(9);
          auto it = saving.begin();
          for (std::size_t taken = 0; taken < k; ++taken) ++it;
          state = saving.state_dict();
        }
        dpipe::testing::LogCapture log;
        auto restored = make(!from_threads);
        restored.load_state_dict(state);
        // Saved after k elements, without looking past the k-th: the epoch goes on.
        CHECK(epoch(restored) == std::vector<Batch>(first.begin() + static_cast<std::ptrdiff_t>(k), first.end()));
        CHECK(epoch(restored) == second);
        for (const auto& message : log.messages()) CHECK(message.find("replaying") == std::string::npos);
      }
    }
  }
}

TEST_CASE("Worker threads: each thread is its own worker / current_worker and worker_seed per thread",
          "[concurrency][threads]") {
  auto pipe = iter::from(range(8)).sharding_filter().map([](int x) {
    const auto info = dpipe::current_worker();
    return info ? x * 100 + static_cast<int>(info->worker_id) * 10 + static_cast<int>(info->num_workers) : -1;
  });
  DataLoader2<int> loader(pipe, worker_threads(2));
  CHECK(epoch(loader) == std::vector<int>{2, 112, 202, 312, 402, 512, 602, 712});
  CHECK_FALSE(dpipe::current_worker().has_value());  // the loop's thread is no worker
  auto& service = dynamic_cast<MultiProcessingReadingService&>(*loader.reading_service());
  CHECK(service.worker_pids().empty());
  CHECK(service.to_dot().find("2 worker threads (each runs a copy)") != std::string::npos);
}

TEST_CASE("Worker threads: a handed-over element holds its record / its box / what it encodes to", "[threads]") {
  // A worker thread's allowance for small elements counts these estimates: the ring itself only
  // holds 16-byte records of handles.
  constexpr std::uint64_t kRecord = 16;
  CHECK(dpipe::detail::held_bytes(std::string(100, 'x')) == kRecord + sizeof(std::string) + 8 + 100);
  CHECK(dpipe::detail::held_bytes(Batch(10)) == kRecord + sizeof(Batch) + 8 + 10 * sizeof(int));
  CHECK(dpipe::detail::held_bytes(7) == kRecord + 2 * sizeof(int));
  // Without a Serializer nothing says what an element holds: it counts as larger than any
  // allowance, so such elements keep to the prefetch counts.
  const Tensor tensor{std::make_unique<std::vector<float>>(1000), 1};
  CHECK(dpipe::detail::held_bytes(tensor) == dpipe::detail::kUnknownHeldBytes);
  CHECK(dpipe::detail::kUnknownHeldBytes > (std::uint64_t{64} << 10));
}

TEST_CASE("Worker threads: checkpoints of move-only elements without a Serializer fall back to replaying",
          "[concurrency][threads][checkpoint]") {
  const auto make = [] {
    auto pipe = iter::from(range(40)).sharding_filter().map([](int x) {
      return Tensor{std::make_unique<std::vector<float>>(1, static_cast<float>(x)), x};
    });
    return DataLoader2<Tensor>(pipe, worker_threads(2));
  };
  const auto ids = [](const Tensor& tensor) { return tensor.id; };
  std::vector<std::byte> state;
  dpipe::testing::LogCapture log;
  {
    auto loader = make();
    auto it = loader.begin();
    for (int taken = 0; taken < 6; ++taken) ++it;
    state = loader.state_dict();
  }
  auto restored = make();
  restored.load_state_dict(state);
  CHECK(epoch(restored, ids) == range(6, 40));
  bool warned = false;
  for (const auto& message : log.messages())
    warned = warned || message.find("has no dpipe::Serializer") != std::string::npos;
  CHECK(warned);
}

}  // namespace

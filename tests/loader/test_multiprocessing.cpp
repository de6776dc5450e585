// MultiProcessingReadingService with real forked workers (SPEC §8): the graph split, the merge
// order, seeding, the worker hooks, element types crossing, to_dot.

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"
#include "support/message.hpp"
#include "support/shared_counter.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::DataLoader2;
using dpipe::InProcessReadingService;
using dpipe::MultiProcessingOptions;
using dpipe::MultiProcessingReadingService;
using dpipe::testing::epoch;
using dpipe::testing::MessageContains;
using dpipe::testing::range;
using dpipe::testing::workers;

TEST_CASE("MultiProcessing: balanced shards merge back into the original order (T06)", "[mp]") {
  for (std::size_t n = 1; n <= 4; ++n) {
    INFO(n << " workers");
    DataLoader2<int> loader(iter::from(range(10)).sharding_filter(), workers(n));
    CHECK(epoch(loader) == range(10));
    CHECK(loader.reading_service() != nullptr);
  }
}

TEST_CASE("MultiProcessing: workers persist across epochs", "[mp]") {
  DataLoader2<int> loader(iter::from(range(100)).sharding_filter().map([](int x) { return x * 2; }), workers(2));
  std::vector<int> doubled;
  for (int x : range(100)) doubled.push_back(2 * x);
  CHECK(epoch(loader) == doubled);
  auto& service = dynamic_cast<MultiProcessingReadingService&>(*loader.reading_service());
  const auto pids = service.worker_pids();
  REQUIRE(pids.size() == 2);
  CHECK(pids[0] != pids[1]);
  for (int i = 0; i < 3; ++i) CHECK(epoch(loader) == doubled);
  CHECK(service.worker_pids() == pids);
  loader.shutdown();
  CHECK(service.worker_pids().empty());
}

TEST_CASE("MultiProcessing: uneven shards of any sizes merge cyclically without loss", "[mp]") {
  // Worker w of N receives the elements i with i % N == w; the filter keeps the listed ones. The
  // merge takes one element per live worker in turn and skips the workers that ended.
  struct Case {
    std::size_t workers;
    std::set<int> kept;
    std::vector<int> expected;
  };
  const std::vector<Case> cases = {
      {2, {0, 2, 4, 6, 1}, {0, 1, 2, 4, 6}},                                // sizes 4 / 1
      {2, {1, 3, 5, 7, 9}, {1, 3, 5, 7, 9}},                                // sizes 0 / 5
      {3, {0, 3, 6, 9, 12, 15, 18, 1, 4}, {0, 1, 3, 4, 6, 9, 12, 15, 18}},  // sizes 7 / 2 / 0
      {3, {}, {}},                                                          // nothing at all
  };
  for (const auto& c : cases) {
    INFO(c.workers << " workers, expected " << ::Catch::Detail::stringify(c.expected));
    const auto kept = c.kept;
    auto pipe = iter::from(range(21)).sharding_filter().filter([kept](int x) { return kept.contains(x); });
    DataLoader2<int> loader(pipe, workers(c.workers));
    CHECK(epoch(loader) == c.expected);
    CHECK(epoch(loader) == c.expected);
  }
}

TEST_CASE("MultiProcessing: the same seed gives the same order / equal to in process for 1-4 workers",
          "[mp][determinism]") {
  const auto pipeline = [] {
    return iter::from(range(240)).shuffle(64).sharding_filter().map([](int x) { return x + 1; });
  };
  DataLoader2<int> in_process(pipeline(), InProcessReadingService());
  in_process.seed(2024);
  std::vector<std::vector<int>> expected;
  for (int e = 0; e < 3; ++e) expected.push_back(epoch(in_process));
  CHECK(expected[0] != expected[1]);  // every epoch gets new seeds
  auto sorted = expected[0];
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == range(1, 241));
  for (std::size_t n = 1; n <= 4; ++n) {
    INFO(n << " workers");
    DataLoader2<int> loader(pipeline(), workers(n));
    loader.seed(2024);
    for (int e = 0; e < 3; ++e) CHECK(epoch(loader) == expected[static_cast<std::size_t>(e)]);
  }
}

TEST_CASE("MultiProcessing: iterating again mid-epoch starts a new epoch / the old iterator is stale (T07)", "[mp]") {
  const auto pipeline = [] { return iter::from(range(40)).shuffle().sharding_filter(); };
  DataLoader2<int> in_process(pipeline());
  in_process.seed(7);
  std::vector<int> head;
  for (int x : in_process) {
    head.push_back(x);
    if (head.size() == 5) break;
  }
  const auto next_epoch = epoch(in_process);
  for (std::size_t n = 1; n <= 2; ++n) {
    INFO(n << " workers");
    DataLoader2<int> loader(pipeline(), workers(n));
    loader.seed(7);
    auto first = loader.begin();
    std::vector<int> taken;
    for (; taken.size() < 5; ++first) taken.push_back(*first);
    CHECK(taken == head);
    CHECK(epoch(loader) == next_epoch);  // the records of the abandoned epoch are dropped
    CHECK_THROWS_MATCHES(*first, dpipe::UsageError, Catch::Message(dpipe::testing::kStaleLoader));
    CHECK(epoch(loader).size() == 40);
  }
}

TEST_CASE("MultiProcessing: any prefetch counts (0 included) give the in-process order (T24-T28 grid)", "[mp]") {
  const auto pipeline = [] { return iter::from(range(300)).shuffle().sharding_filter().map([](int x) { return -x; }); };
  DataLoader2<int> in_process(pipeline());
  in_process.seed(3);
  const auto first = epoch(in_process);
  const auto second = epoch(in_process);
  for (const std::size_t worker_prefetch : {std::size_t{0}, std::size_t{1}, std::size_t{10}}) {
    for (const std::size_t main_prefetch : {std::size_t{0}, std::size_t{1}, std::size_t{10}}) {
      INFO("worker_prefetch_cnt " << worker_prefetch << ", main_prefetch_cnt " << main_prefetch);
      MultiProcessingOptions options{.num_workers = 2};
      options.worker_prefetch_cnt = worker_prefetch;
      options.main_prefetch_cnt = main_prefetch;
      DataLoader2<int> loader(pipeline(), MultiProcessingReadingService(options));
      loader.seed(3);
      CHECK(epoch(loader) == first);
      CHECK(epoch(loader) == second);
    }
  }
}

TEST_CASE("MultiProcessing: a worker runs ahead of its prefetch counts with small elements", "[mp]") {
  // One element may be in flight by the prefetch counts; small elements may run ahead of them
  // within the worker's allowance (64 KiB: of shared memory for a worker process, of what the
  // elements hold for a worker thread), so the worker makes 300 ints while the main process holds
  // the first. Without the allowance it would stop after the first few.
  const auto kind = GENERATE(dpipe::WorkerKind::kProcess, dpipe::WorkerKind::kThread);
  CAPTURE(kind == dpipe::WorkerKind::kThread ? "threads" : "processes");
  const auto made = std::make_shared<dpipe::testing::SharedCounter>();
  MultiProcessingOptions options{.num_workers = 1, .worker_kind = kind};
  options.worker_prefetch_cnt = 1;
  options.main_prefetch_cnt = 0;
  auto pipe = iter::from(range(1000)).sharding_filter().map([made](int x) {
    made->add();
    return x;
  });
  DataLoader2<int> loader(pipe, MultiProcessingReadingService(options));
  auto it = loader.begin();
  CHECK(*it == 0);
  CHECK(made->wait_for(300, std::chrono::seconds(30)) >= 300);
  std::vector<int> rest;
  for (++it; it != loader.end(); ++it) rest.push_back(*it);
  CHECK(rest.size() == 999);
  CHECK(rest.back() == 999);
}

/// worker_reset_fn's calls, counted in the process that runs it (a worker or the dispatcher).
int g_resets_in_this_process = 0;

TEST_CASE("MultiProcessing: worker_reset_fn runs in the dispatching process too / each epoch", "[mp]") {
  MultiProcessingOptions options{.num_workers = 2};
  options.worker_reset_fn = [](dpipe::DataPipePtr graph, const dpipe::WorkerInfo&, dpipe::SeedGenerator&) {
    ++g_resets_in_this_process;
    return graph;
  };
  // The first map runs in the dispatching process, the second in the workers.
  auto pipe = iter::from(range(4))
                  .map([](int x) { return x + 100 * g_resets_in_this_process; })
                  .sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing)
                  .map([](int x) { return x + 10000 * g_resets_in_this_process; });
  DataLoader2<int> loader(pipe, MultiProcessingReadingService(options));
  CHECK(epoch(loader) == std::vector<int>{10100, 10101, 10102, 10103});
  CHECK(epoch(loader) == std::vector<int>{20200, 20201, 20202, 20203});
}

TEST_CASE("MultiProcessing: worker_init_fn / worker_reset_fn / current_worker and worker_random", "[mp]") {
  using Tagged = std::tuple<int, std::size_t, std::uint64_t>;
  // What the functions see is encoded in the elements, since they run in the worker processes:
  // x + 1000 * worker_id + 100 * num_workers + 10000 * (worker_reset_fn calls in that worker).
  MultiProcessingOptions options{.num_workers = 2};
  options.worker_init_fn = [](dpipe::DataPipePtr graph, const dpipe::WorkerInfo& info) {
    return dpipe::graph::as_iter<int>(graph)
        .map([tag = static_cast<int>(info.worker_id * 1000 + info.num_workers * 100)](int x) {
          return x + tag + 10000 * g_resets_in_this_process;
        })
        .ptr();
  };
  options.worker_reset_fn = [](dpipe::DataPipePtr graph, const dpipe::WorkerInfo&, dpipe::SeedGenerator&) {
    ++g_resets_in_this_process;
    return graph;
  };
  auto pipe = iter::from(range(6)).sharding_filter();
  DataLoader2<int> loader(pipe, MultiProcessingReadingService(options));
  CHECK(epoch(loader) == std::vector<int>{10200, 11201, 10202, 11203, 10204, 11205});
  CHECK(epoch(loader) == std::vector<int>{20200, 21201, 20202, 21203, 20204, 21205});
  CHECK(g_resets_in_this_process == 0);

  auto tagged = iter::from(range(6)).sharding_filter().map([](int x) {
    const auto worker = dpipe::current_worker();
    return Tagged{x, worker ? worker->worker_id : 99, dpipe::worker_random().getrandbits(32)};
  });
  const auto run = [&](std::uint64_t seed) {
    DataLoader2<Tagged> tagged_loader(tagged, workers(3));
    tagged_loader.seed(seed);
    return std::pair{epoch(tagged_loader), epoch(tagged_loader)};
  };
  const auto [first, second] = run(5);
  REQUIRE(first.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(std::get<0>(first[i]) == static_cast<int>(i));
    CHECK(std::get<1>(first[i]) == i % 3);
  }
  CHECK(first != second);                     // reseeded every epoch
  CHECK(run(5) == std::pair{first, second});  // reproducible
  CHECK(!dpipe::current_worker());            // the main process is no worker
}

/// Neither trivially copyable nor given a Serializer.
struct Opaque {
  std::shared_ptr<int> value;
};

TEST_CASE("MultiProcessing: element types without a Serializer / several replicable branches / are refused",
          "[mp][errors]") {
  DataLoader2<Opaque> opaque(
      iter::from(range(4)).sharding_filter().map([](int x) { return Opaque{std::make_shared<int>(x)}; }), workers(2));
  CHECK_THROWS_MATCHES(opaque.begin(), dpipe::InvalidArgument,
                       MessageContains({"the output of the worker processes",
                                        "cannot cross a process boundary: declare DPIPE_FIELDS(...) in the type or "
                                        "specialize dpipe::Serializer"}));
  auto a = iter::from(range(4)).sharding_filter().fullsync();
  auto b = iter::from(range(4)).sharding_filter().fullsync();
  DataLoader2<std::tuple<int, int>> two(a.zip(b), workers(2));
  CHECK_THROWS_MATCHES(
      two.begin(), dpipe::InvalidArgument,
      Catch::Message("MultiProcessingReadingService only supports single replicable branch currently"));
}

TEST_CASE("MultiProcessing: a non-replicable tail stays in the main process / to_dot draws the processes",
          "[mp][graph]") {
  dpipe::testing::LogCapture log;
  auto pipe = iter::from(range(8)).shuffle().sharding_filter().map([](int x) { return x * 10; }).fullsync();
  DataLoader2<int> loader(pipe, workers(2));
  loader.seed(3);
  auto values = epoch(loader);
  std::sort(values.begin(), values.end());
  CHECK(values == std::vector<int>{0, 10, 20, 30, 40, 50, 60, 70});
  const auto main_graph = loader.graph();
  CHECK(main_graph.root()->name() == "fullsync");
  CHECK(main_graph.root()->inputs().at(0)->name() == "merge_workers");
  CHECK(main_graph.root()->inputs().at(0)->inputs().empty());
  const auto dot = dynamic_cast<MultiProcessingReadingService&>(*loader.reading_service()).to_dot();
  CHECK_THAT(dot, Catch::Matchers::Contains("label=\"main process\"") &&
                      Catch::Matchers::Contains("label=\"2 worker processes (each runs a copy)\"") &&
                      Catch::Matchers::Contains("style=dashed, label=\"shared memory\""));
  CHECK_THAT(dot, !Catch::Matchers::Contains("dispatching process"));
  // A user node marked non-replicable runs in the main process (current_worker() is empty there).
  auto user_tail = iter::from(range(4)).sharding_filter().map([](int x) { return dpipe::current_worker() ? -1 : x; });
  user_tail.node().set_replicable(false);
  DataLoader2<int> user_loader(user_tail, workers(2));
  CHECK(epoch(user_loader) == range(4));
}

TEST_CASE("MultiProcessing: a pipeline without a sharding point warns that every worker yields everything",
          "[mp][linter]") {
  dpipe::testing::LogCapture log;
  DataLoader2<int> whole(iter::from(range(3)), workers(2));
  CHECK(epoch(whole) == std::vector<int>{0, 0, 1, 1, 2, 2});
  CHECK(log.messages() ==
        std::vector<std::string>{
            "MultiProcessingReadingService: the pipeline has no sharding_filter or "
            "sharding_round_robin_dispatch: each of the 2 worker processes yields the whole dataset"});
  dpipe::testing::LogCapture quiet;
  DataLoader2<int> dispatched(
      iter::from(range(3)).shuffle().sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing),
      workers(2));
  CHECK(epoch(dispatched).size() == 3);
  CHECK(quiet.messages().empty());
}

TEST_CASE("MultiProcessing: a dispatching process deals element j to worker j mod N", "[mp][dispatch]") {
  for (std::size_t n = 1; n <= 3; ++n) {
    INFO(n << " workers");
    auto pipe = iter::from(range(50))
                    .map([](int x) { return x * 2; })
                    .sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing)
                    .map([](int x) {
                      return std::pair{x, dpipe::current_worker()->worker_id};
                    });
    DataLoader2<std::pair<int, std::size_t>> loader(pipe, workers(n));
    for (int e = 0; e < 2; ++e) {
      const auto out = epoch(loader);
      REQUIRE(out.size() == 50);
      for (std::size_t j = 0; j < out.size(); ++j) {
        CHECK(out[j].first == static_cast<int>(2 * j));
        CHECK(out[j].second == j % n);
      }
    }
    if (n == 3) {
      const auto dot = dynamic_cast<MultiProcessingReadingService&>(*loader.reading_service()).to_dot();
      CHECK_THAT(dot, Catch::Matchers::Contains("label=\"dispatching process\"") &&
                          Catch::Matchers::Contains("label=\"element j to worker j mod N\""));
    }
  }
}

TEST_CASE("MultiProcessing: two dispatching branches run up to their lowest common ancestor in one process",
          "[mp][dispatch]") {
  const auto mp = dpipe::ShardingPriority::kMultiprocessing;
  auto left = iter::from(range(6)).sharding_round_robin_dispatch(mp);
  auto right = iter::from(range(10, 16)).sharding_round_robin_dispatch(mp);
  auto pipe = left.zip(right).map([](const std::tuple<int, int>& pair) {
    return std::pair{std::get<0>(pair) * 100 + std::get<1>(pair), dpipe::current_worker()->worker_id};
  });
  DataLoader2<std::pair<int, std::size_t>> loader(pipe, workers(2));
  const auto out = epoch(loader);
  REQUIRE(out.size() == 6);
  for (std::size_t j = 0; j < out.size(); ++j) {
    CHECK(out[j].first == static_cast<int>(j * 100 + 10 + j));  // the zip ran before the dealing
    CHECK(out[j].second == j % 2);
  }
}

struct Sample {
  std::string path;
  std::vector<float> pixels;
  int label = 0;
  friend bool operator==(const Sample&, const Sample&) = default;
  DPIPE_FIELDS(path, pixels, label)
};

struct Point {
  double x;
  double y;
  friend bool operator==(const Point&, const Point&) = default;
};

template <class T, class Make>
void check_crossing(Make make, std::size_t queue_bytes = std::size_t{1} << 20) {
  std::vector<T> expected;
  for (int i = 0; i < 12; ++i) expected.push_back(make(i));
  auto pipe = iter::from(range(12)).sharding_filter().map([make](int i) { return make(i); });
  MultiProcessingOptions options{.num_workers = 2};
  options.queue_bytes = queue_bytes;
  DataLoader2<T> loader(pipe, MultiProcessingReadingService(options));
  CHECK(epoch(loader) == expected);
}

TEST_CASE("MultiProcessing: every covered element type crosses / long elements in parts", "[mp][serialization]") {
  check_crossing<dpipe::Columns<Sample>>([](int i) {
    dpipe::Columns<Sample> batch;
    batch.get<0>() = {"a" + std::to_string(i), "b"};
    batch.get<1>() = {{static_cast<float>(i)}, {}};
    batch.get<2>() = {i, -i};
    return batch;
  });
  check_crossing<double>([](int i) { return i * 0.5; });
  check_crossing<std::string>(
      [](int i) { return std::string(static_cast<std::size_t>(i) * 3, 'a' + static_cast<char>(i)); });
  check_crossing<std::vector<float>>([](int i) { return std::vector<float>(static_cast<std::size_t>(i), 1.5F); });
  check_crossing<std::array<int, 3>>([](int i) { return std::array<int, 3>{i, -i, i * i}; });
  check_crossing<std::tuple<int, std::string, std::optional<long>>>([](int i) {
    return std::tuple<int, std::string, std::optional<long>>{i, std::to_string(i),
                                                             i % 2 ? std::optional<long>(i) : std::nullopt};
  });
  check_crossing<std::variant<int, std::string>>([](int i) {
    return i % 2 ? std::variant<int, std::string>(i) : std::variant<int, std::string>(std::to_string(i));
  });
  check_crossing<std::map<std::string, int>>([](int i) { return std::map<std::string, int>{{"i", i}, {"j", -i}}; });
  check_crossing<Sample>([](int i) {
    return Sample{"img" + std::to_string(i), std::vector<float>(4, static_cast<float>(i)), i};
  });
  check_crossing<Point>([](int i) { return Point{i * 1.0, i * 2.0}; });
  // 100 KiB elements through 16 KiB queues: each travels in parts.
  check_crossing<std::vector<std::uint8_t>>(
      [](int i) {
        std::vector<std::uint8_t> bytes(100 * 1024);
        for (std::size_t k = 0; k < bytes.size(); ++k)
          bytes[k] = static_cast<std::uint8_t>(k * 7 + static_cast<std::size_t>(i));
        return bytes;
      },
      16 * 1024);
}

TEST_CASE("MultiProcessing: prefetch and threadpool_map run inside the workers", "[mp]") {
  auto pipe = iter::from(range(40)).sharding_filter().prefetch(4).threadpool_map([](int x) { return x * x; }, 2, 4);
  DataLoader2<int> loader(pipe, workers(2));
  std::vector<int> squares;
  for (int x : range(40)) squares.push_back(x * x);
  CHECK(epoch(loader) == squares);
  CHECK(epoch(loader) == squares);
}

TEST_CASE("MultiProcessing: pause / resume / limit lose and repeat nothing (T26 / T28)", "[mp][pause]") {
  for (const bool dispatch : {false, true}) {
    INFO((dispatch ? "with" : "without") << " a dispatching process");
    auto source = iter::from(range(30));
    auto pipe = dispatch ? source.sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing)
                         : source.sharding_filter();
    DataLoader2<int> loader(pipe.map([](int x) { return x; }), workers(3));
    std::vector<int> seen;
    std::vector<std::size_t> rounds;
    auto it = loader.begin();
    loader.limit(4);
    while (seen.size() < 30) {
      std::size_t got = 0;
      for (; it != loader.end(); ++it, ++got) seen.push_back(*it);
      rounds.push_back(got);
      loader.resume();
    }
    CHECK(seen == range(30));
    CHECK(rounds == std::vector<std::size_t>{4, 4, 4, 4, 4, 4, 4, 2});
    loader.pause();
    CHECK(it == loader.end());
    loader.resume();
    CHECK(it == loader.end());  // the epoch is over
  }
  DataLoader2<int> no_workers(iter::from(range(3)), MultiProcessingReadingService());
  CHECK(epoch(no_workers) == range(3));
  CHECK_THROWS_MATCHES(no_workers.pause(), dpipe::UsageError,
                       Catch::Message("If you would like to use `pause` with `MultiProcessingReadingService`, please "
                                      "use more than 0 worker."));
}

}  // namespace

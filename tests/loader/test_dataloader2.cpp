// DataLoader2: torchdata's epoch protocol (reference §1.5, §1.8), determinism, pause / resume /
// limit, adapters and the linter.

#include <algorithm>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"
#include "support/recording_service.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::DataLoader2;
using dpipe::InProcessReadingService;
using dpipe::testing::CallLog;
using dpipe::testing::epoch;
using dpipe::testing::kStaleLoader;
using dpipe::testing::range;
using dpipe::testing::RecordingService;
using Log = std::vector<std::string>;

const std::string kShutDown = "Cannot iterate over the DataLoader as it has already been shut down";

TEST_CASE("DataLoader2: yields the pipeline / epoch after epoch (T01 / T06)", "[loader]") {
  DataLoader2<int> plain(iter::from(range(3)));
  CHECK(epoch(plain) == range(3));
  auto sharded = iter::from(range(10)).sharding_filter();
  DataLoader2<int> in_process(sharded, InProcessReadingService());
  for (int i = 0; i < 3; ++i) CHECK(epoch(in_process) == range(10));
  CHECK(in_process.epoch() == 3);
}

TEST_CASE("DataLoader2: copies the graph and the reading service", "[loader]") {
  auto source = iter::from(range(4));
  DataLoader2<int> loader(source);
  auto it = source.begin();  // iterating the caller's graph does not disturb the loader's copy
  CHECK(epoch(loader) == range(4));
  CHECK(*it == 0);
  CHECK(loader.graph_before_reading_service().root() != source.ptr());
}

TEST_CASE("DataLoader2: the reading service protocol (reference §1.5)", "[loader][protocol]") {
  auto log = std::make_shared<Log>();
  {
    DataLoader2<int> loader(iter::from(range(3)), RecordingService("rs", log));
    CHECK(log->empty());  // nothing before the first iteration
    auto first = loader.begin();
    CHECK(*log == Log{"rs.initialize", "rs.initialize_iteration"});
    auto second = loader.begin();  // no element taken: same epoch, nothing called
    CHECK(*log == Log{"rs.initialize", "rs.initialize_iteration"});
    CHECK(*second == 0);
    CHECK_THROWS_MATCHES(*first, dpipe::UsageError, Catch::Message(kStaleLoader));
    CHECK(log->back() == "rs.finalize_iteration");  // a stale iterator finalizes first
    log->clear();
    auto third = loader.begin();  // an element was taken: a new epoch, no finalize for the old one
    CHECK(*log == Log{"rs.initialize_iteration"});
    std::vector<int> got;
    for (; third != loader.end(); ++third) got.push_back(*third);
    CHECK(got == range(3));
    CHECK(*log == Log{"rs.initialize_iteration", "rs.finalize_iteration"});
    log->clear();
    loader.shutdown();
    loader.shutdown();  // idempotent
    CHECK(*log == Log{"rs.finalize_iteration", "rs.finalize"});
    CHECK_THROWS_MATCHES(loader.begin(), dpipe::UsageError, Catch::Message(kShutDown));
  }
  CHECK(log->size() == 2);  // the destructor did not finalize again
  log->clear();
  { DataLoader2<int> never_iterated(iter::from(range(3)), RecordingService("rs", log)); }
  CHECK(*log == Log{"rs.finalize_iteration", "rs.finalize"});  // shutdown by the destructor (T02)
}

TEST_CASE("DataLoader2: reading past the end finalizes the epoch once / no pipeline is refused", "[loader][protocol]") {
  // torchdata calls finalize_iteration on every read after the end; dpipe once per epoch.
  auto log = std::make_shared<Log>();
  DataLoader2<int> loader(iter::from(range(2)), RecordingService("rs", log));
  auto it = loader.begin();
  ++it;
  ++it;
  CHECK(it == loader.end());
  CHECK(it == loader.end());
  CHECK(*log == Log{"rs.initialize", "rs.initialize_iteration", "rs.finalize_iteration"});
  // A checkpoint holds state, not the pipeline's code: a loader is always built from a pipeline.
  CHECK_THROWS_MATCHES(DataLoader2<int>(dpipe::IterPipe<int>()), dpipe::InvalidArgument,
                       Catch::Message("DataLoader2: the pipeline is empty (a default-constructed handle)"));
}

TEST_CASE("DataLoader2: a new iterator restarts the epoch / the old one is stale (T07)", "[loader][protocol]") {
  DataLoader2<int> loader(iter::from(range(10)), InProcessReadingService());
  auto it1 = loader.begin();
  CHECK(*it1 == 0);
  ++it1;
  CHECK(*it1 == 1);
  auto it2 = loader.begin();
  CHECK(*it2 == 0);
  ++it2;
  CHECK(*it2 == 1);
  ++it1;
  CHECK_THROWS_MATCHES(*it1, dpipe::UsageError, Catch::Message(kStaleLoader));
  std::vector<int> rest;
  for (++it2; it2 != loader.end(); ++it2) rest.push_back(*it2);
  CHECK(rest == dpipe::testing::range(2, 10));
}

TEST_CASE("DataLoader2: an exception shuts the loader down and keeps its type", "[loader][protocol]") {
  auto log = std::make_shared<Log>();
  auto failing = iter::from(range(5)).map([](int x) {
    if (x == 3) throw std::out_of_range("three");
    return x;
  });
  DataLoader2<int> loader(failing, RecordingService("rs", log));
  std::vector<int> got;
  CHECK_THROWS_MATCHES(
      [&] {
        for (int x : loader) got.push_back(x);
      }(),
      std::out_of_range, Catch::Message("three"));
  CHECK(got == range(3));
  CHECK(*log == Log{"rs.initialize", "rs.initialize_iteration", "rs.finalize_iteration", "rs.finalize"});
  CHECK_THROWS_MATCHES(loader.begin(), dpipe::UsageError, Catch::Message(kShutDown));
}

// Expected orders: torchdata's Shuffler on CPython's random, seeded with SeedGenerator(0)'s
// stream (6679402142117448868, 684265014234019051, ...).
TEST_CASE("DataLoader2: seed() gives torchdata's order in the first and later epochs", "[loader][determinism]") {
  const std::vector<int> first{6, 8, 3, 1, 5, 7, 2, 9, 0, 4};
  const std::vector<int> second{6, 2, 8, 3, 1, 5, 9, 0, 7, 4};
  const std::vector<int> third{1, 5, 7, 4, 8, 3, 2, 6, 9, 0};
  auto shuffled = iter::from(range(10)).shuffle();
  auto sharded = iter::from(range(10)).shuffle().sharding_filter();
  for (const auto& pipe : {shuffled, sharded}) {
    DataLoader2<int> loader(pipe, InProcessReadingService());
    loader.seed(0);
    CHECK(epoch(loader) == first);
    CHECK(epoch(loader) == second);  // the generator continues
    CHECK(epoch(loader) == third);
    loader.seed(0);
    CHECK(epoch(loader) == first);  // applied at the next epoch
  }
  DataLoader2<int> without_service(shuffled);  // dpipe seeds without a reading service too
  without_service.seed(0);
  CHECK(epoch(without_service) == first);
  CHECK(epoch(without_service) == second);
  DataLoader2<int> unseeded(shuffled);
  auto order = epoch(unseeded);
  std::sort(order.begin(), order.end());
  CHECK(order == range(10));
}

TEST_CASE("DataLoader2: pause and resume lose and repeat nothing (T20 / T21)", "[loader][pause]") {
  auto pipe = iter::from(range(10)).shuffle().sharding_filter();
  auto double_pause = pipe.prefetch().prefetch();
  for (const auto& source : {pipe, double_pause}) {
    for (const std::size_t prefetch : {std::size_t{0}, std::size_t{5}}) {
      DataLoader2<int> loader(source, InProcessReadingService(prefetch));
      std::vector<int> got;
      int i = 0;
      for (int x : loader) {
        got.push_back(x);
        if (i == 2 || i == 8) {
          loader.pause();
          loader.resume();
        }
        ++i;
      }
      std::sort(got.begin(), got.end());
      CHECK(got == range(10));
    }
    DataLoader2<int> stops(source, InProcessReadingService(5));
    int taken = 0;
    for (int x : stops) {
      (void)x;
      if (++taken == 3) stops.pause();
    }
    CHECK(taken == 3);
  }
}

TEST_CASE("DataLoader2: limit pauses after n elements / resume continues (T22)", "[loader][pause]") {
  const auto drain = [](auto& it, auto& loader, std::vector<int>& into) {
    std::size_t count = 0;
    for (; it != loader.end(); ++it, ++count) into.push_back(*it);
    return count;
  };
  auto pipe = iter::from(range(10)).shuffle().sharding_filter();
  DataLoader2<int> loader(pipe, InProcessReadingService(5));
  std::vector<int> got;
  auto it = loader.begin();
  loader.limit(3);
  CHECK(drain(it, loader, got) == 3);
  CHECK(it == loader.end());  // stays at the end while paused
  loader.resume();
  CHECK(drain(it, loader, got) == 3);
  loader.limit(std::nullopt);
  loader.resume();
  CHECK(drain(it, loader, got) == 4);
  std::sort(got.begin(), got.end());
  CHECK(got == range(10));

  DataLoader2<int> second(pipe.prefetch().prefetch(), InProcessReadingService(5));
  std::vector<int> counts;
  std::vector<int> all;
  auto it2 = second.begin();
  second.limit(3);
  drain(it2, second, all);
  counts.push_back(static_cast<int>(all.size()));
  second.limit(4);
  second.resume();
  drain(it2, second, all);
  counts.push_back(static_cast<int>(all.size()));
  second.resume();
  second.limit(2);
  drain(it2, second, all);
  counts.push_back(static_cast<int>(all.size()));
  CHECK(counts == std::vector<int>{3, 7, 9});
}

TEST_CASE("DataLoader2: resume without pause / and services without pause support / warn", "[loader][pause]") {
  dpipe::testing::LogCapture log;
  DataLoader2<int> loader(iter::from(range(3)), InProcessReadingService());
  loader.resume();
  auto log_calls = std::make_shared<Log>();
  DataLoader2<int> recording(iter::from(range(3)), RecordingService("rs", log_calls));
  recording.pause();
  recording.resume();
  recording.limit(2);
  CHECK(log.messages() == Log{"Resume is called when `DataLoader2` is not paused. No operation is performed.",
                              "ReadingService doesn't support `pause`.", "ReadingService doesn't support `resume`.",
                              "ReadingService doesn't support `limit`."});
}

TEST_CASE("Adapters: Shuffle switches shuffles / or appends one with torchdata's warning (T49-T51)",
          "[loader][adapter]") {
  const auto run = [](dpipe::IterPipe<int> pipe, std::vector<dpipe::AdapterPtr> adapters) {
    DataLoader2<int> loader(pipe, adapters);
    loader.seed(0);
    return epoch(loader);
  };
  dpipe::testing::LogCapture log;
  CHECK(run(iter::from(range(500)), {}) == range(500));
  auto appended = run(iter::from(range(500)), {std::make_shared<dpipe::Shuffle>(true)});
  CHECK(appended != range(500));
  std::sort(appended.begin(), appended.end());
  CHECK(appended == range(500));
  REQUIRE(log.messages().size() == 1);
  CHECK(log.messages()[0] ==
        "`shuffle=True` was set, but the datapipe does not contain a `Shuffler`. Adding one at the end. Be aware that "
        "the default buffer size might not be sufficient for your task.");
  auto shuffled = iter::from(range(500)).shuffle();
  CHECK(run(shuffled, {}) != range(500));
  CHECK(run(shuffled, {std::make_shared<dpipe::Shuffle>(true)}) != range(500));
  CHECK(run(shuffled, {std::make_shared<dpipe::Shuffle>(std::nullopt)}) != range(500));
  CHECK(run(shuffled, {std::make_shared<dpipe::Shuffle>(false)}) == range(500));
  CHECK(log.messages().size() == 1);
}

/// A user adapter: keeps the first `count` elements.
class FirstN final : public dpipe::Adapter {
 public:
  explicit FirstN(std::size_t count) : count_(count) {}
  dpipe::DataPipePtr operator()(dpipe::DataPipePtr root) override {
    return dpipe::graph::as_iter<int>(root).header(count_).ptr();
  }

 private:
  std::size_t count_;
};

TEST_CASE("Adapters: user adapters run once / at construction", "[loader][adapter]") {
  DataLoader2<int> loader(iter::from(range(10)), {std::make_shared<FirstN>(4), std::make_shared<FirstN>(2)});
  CHECK(epoch(loader) == range(2));
  CHECK(epoch(loader) == range(2));
  CHECK(loader.graph_before_reading_service().root()->name() == "header");
}

// Reference §6.2: src = from(range(20)); f = an identity map.
TEST_CASE("Linter: shuffle before sharding on every path (T55)", "[loader][linter]") {
  const auto src = [] { return iter::from(range(20)); };
  const auto f = [](int x) { return x; };
  const auto check = [](const auto& pipe) { return dpipe::graph::check_shuffle_before_sharding(pipe.ptr()); };
  CHECK(check(src().map(f).shuffle()));
  CHECK(check(src().map(f)));
  CHECK(check(src().map(f).shuffle().sharding_filter()));
  CHECK_FALSE(check(src().map(f).sharding_filter()));
  CHECK_FALSE(check(src().map(f).sharding_filter().shuffle()));
  for (const bool shuffled : {true, false}) {
    auto s = shuffled ? src().shuffle() : src();
    auto [a, b] = s.map([](int x) { return std::make_pair(x, x); }).unzip();
    CHECK(check(a.sharding_filter().zip(b.map(f).sharding_filter())) == shuffled);
    auto [c, d] = s.map([](int x) { return std::make_pair(x, x); }).unzip();
    CHECK(check(c.map(f).zip(d).sharding_filter()) == shuffled);
  }
  auto [a, b] = src().map([](int x) { return std::make_pair(x, x); }).unzip();
  CHECK(check(a.shuffle().map(f).sharding_filter().zip(b.shuffle().sharding_filter()).map([](auto t) { return t; })));
  auto [c, d] = src().map([](int x) { return std::make_pair(x, x); }).unzip();
  CHECK_FALSE(check(c.map(f).sharding_filter().zip(d.shuffle().sharding_filter())));
  auto [h, k] = src().map([](int x) { return std::make_pair(x, x); }).unzip();
  CHECK_FALSE(check(h.map(f).sharding_filter().sharding_filter().zip(k.sharding_filter())));  // the shuffle=False row
  auto [e, g] = src().map([](int x) { return std::make_pair(x, x); }).unzip();
  CHECK_FALSE(check(e.shuffle().map(f).zip(g).sharding_filter()));
}

TEST_CASE("DataLoader2: an epoch that yields no elements is logged once / a full one is not", "[loader][protocol]") {
  dpipe::testing::LogCapture log;
  DataLoader2<int> loader(iter::from(range(6)).filter([](int x) { return x > 10; }), InProcessReadingService());
  auto it = loader.begin();
  CHECK(it == loader.end());
  CHECK(it == loader.end());  // reading past the end again: the same epoch
  CHECK(epoch(loader).empty());
  CHECK(log.messages() ==
        std::vector<std::string>{"DataLoader2: epoch 1 yielded no elements (an empty source, or a filter or shard that "
                                 "keeps nothing)",
                                 "DataLoader2: epoch 2 yielded no elements (an empty source, or a filter or shard that "
                                 "keeps nothing)"});
  DataLoader2<int> full(iter::from(range(6)), InProcessReadingService());
  CHECK(epoch(full) == range(6));
  CHECK(log.messages().size() == 2);
}

TEST_CASE("Linter: a loader warns once about sharding without a shuffle", "[loader][linter]") {
  dpipe::testing::LogCapture log;
  DataLoader2<int> loader(iter::from(range(4)).sharding_filter(), InProcessReadingService());
  (void)epoch(loader);
  (void)epoch(loader);
  REQUIRE(log.messages().size() == 1);
  CHECK(log.messages()[0] ==
        "DataLoader2: a sharding_filter has no shuffle upstream of it on every path: each worker or rank would see its "
        "share in the source's order. Put shuffle() before sharding_filter() to mix the data across shards.");
  DataLoader2<int> twice(iter::from(range(4)).sharding_filter().sharding_filter(), InProcessReadingService());
  CHECK_THROWS_WITH(twice.begin(), Catch::StartsWith("Sharding twice on a single pipeline is likely unintended"));
}

TEST_CASE("InProcessReadingService: prefetch_cnt / init_fn and reset_fn all take effect", "[loader][in_process]") {
  int resets = 0;
  InProcessReadingService service(
      4,
      [](dpipe::DataPipePtr graph, const dpipe::WorkerInfo& info) {
        CHECK(info == dpipe::WorkerInfo{1, 0});
        return dpipe::graph::as_iter<int>(graph).map([](int x) { return x * 10; }).ptr();
      },
      [&resets](dpipe::DataPipePtr graph, const dpipe::WorkerInfo& info, dpipe::SeedGenerator& /*seeds*/) {
        CHECK(info == dpipe::WorkerInfo{1, 0});
        ++resets;
        return graph;
      });
  DataLoader2<int> loader(iter::from(range(3)), service);
  CHECK(epoch(loader) == std::vector<int>{0, 10, 20});
  CHECK(epoch(loader) == std::vector<int>{0, 10, 20});
  CHECK(resets == 2);
  CHECK(loader.graph().root()->name() == "prefetch");
  CHECK(loader.graph_before_reading_service().root()->name() == "from");
}

TEST_CASE("SequentialReadingService: torchdata's call order / chaining and checkpoints", "[loader][sequential]") {
  auto log = std::make_shared<Log>();
  const dpipe::SequentialReadingService service(RecordingService("a", log), RecordingService("b", log));
  {
    DataLoader2<int> loader(iter::from(range(2)), service);
    CHECK(epoch(loader) == range(2));
    (void)loader.state_dict();
  }
  CHECK(*log == Log{"a.initialize", "b.initialize", "a.initialize_iteration", "b.initialize_iteration(fn)",
                    "b.finalize_iteration", "a.finalize_iteration", "a.checkpoint", "b.checkpoint",
                    "b.finalize_iteration", "a.finalize_iteration", "b.finalize", "a.finalize"});
  log->clear();
  DataLoader2<int> source_loader(iter::from(range(4)), service);
  auto it = source_loader.begin();
  ++it;
  const auto state = source_loader.state_dict();
  log->clear();
  DataLoader2<int> restored(iter::from(range(4)), service);
  restored.load_state_dict(state);
  CHECK(epoch(restored) == dpipe::testing::range(1, 4));
  CHECK(*log == Log{"a.restore(a)", "b.restore(b)", "b.finalize_iteration", "a.finalize_iteration"});
}

/// A service without checkpoint support.
class PlainService final : public dpipe::ReadingService<PlainService> {
 public:
  dpipe::DataPipePtr initialize(dpipe::DataPipePtr graph) override { return graph; }
};

TEST_CASE("SequentialReadingService: a child without checkpoints / a checkpoint of other services",
          "[loader][sequential]") {
  auto log = std::make_shared<Log>();
  const dpipe::SequentialReadingService service(RecordingService("a", log), PlainService());
  std::vector<std::byte> state;
  {
    dpipe::testing::LogCapture warnings;
    DataLoader2<int> loader(iter::from(range(4)), service);
    auto it = loader.begin();
    ++it;
    state = loader.state_dict();
    CHECK(warnings.messages() ==
          std::vector<std::string>{"SequentialReadingService: service 1 doesn't support `checkpoint`, skipping..."});
  }
  {
    dpipe::testing::LogCapture warnings;
    DataLoader2<int> restored(iter::from(range(4)), service);
    restored.load_state_dict(state);
    CHECK(epoch(restored) == range(1, 4));
    CHECK(warnings.messages() == std::vector<std::string>{"SequentialReadingService: service 1 doesn't support "
                                                          "`restore` from state, initialize from scratch"});
  }
  DataLoader2<int> three(iter::from(range(4)),
                         dpipe::SequentialReadingService(RecordingService("a", log), PlainService(), PlainService()));
  CHECK_THROWS_MATCHES(three.load_state_dict(state), dpipe::StateError,
                       Catch::Message("SequentialReadingService: the checkpoint has 2 services, this one 3"));
  CHECK(epoch(three) == range(4));  // a refused checkpoint leaves the loader as it was
}

TEST_CASE("DataLoader2: statistics and pictures of the graph", "[loader][diagnostics]") {
  DataLoader2<int> loader(
      iter::from(range(100)).map([](int x) { return x + 1; }).filter([](int x) { return x % 2 == 0; }),
      InProcessReadingService(2));
  CHECK(epoch(loader).size() == 50);  // the first epoch builds the graph the service runs
  // Switched on between epochs: no prefetch thread is reading while the counters change.
  dpipe::graph::enable_statistics(loader.graph().root());
  CHECK(epoch(loader).size() == 50);
  const auto rows = dpipe::graph::statistics(loader.graph().root());
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].label.starts_with("prefetch#"));
  CHECK(rows[0].elements == 50);
  CHECK(rows[1].label.starts_with("filter#"));
  CHECK(rows[1].elements == 50);
  CHECK(rows[2].label.starts_with("map#"));
  CHECK(rows[2].elements == 100);
  CHECK(rows[3].elements == 100);
  for (const auto& row : rows) CHECK(row.exclusive <= row.inclusive);
  const auto table = dpipe::graph::format_statistics(rows);
  CHECK(table.starts_with("node "));
  CHECK(table.find("prefetch#") != std::string::npos);
  const auto before = dpipe::graph::to_dot(loader.graph_before_reading_service());
  const auto after = dpipe::graph::to_dot(loader.graph());
  CHECK(before.find("prefetch#") == std::string::npos);
  CHECK(after.find("prefetch#") != std::string::npos);
}

TEST_CASE("DataLoader2: a second thread using the loader while the first is inside it gets UsageError",
          "[loader][concurrency]") {
  std::promise<void> inside;
  std::promise<void> tried;
  const std::shared_future<void> tried_future = tried.get_future().share();
  auto pipe = iter::from(range(5)).map([&inside, tried_future, first = std::make_shared<bool>(true)](int x) {
    // In the first epoch the iterating thread holds the loader here until the other thread has tried.
    if (x == 2 && std::exchange(*first, false)) {
      inside.set_value();
      tried_future.wait();
    }
    return x;
  });
  DataLoader2<int> loader(pipe);
  std::vector<std::string> errors;  // what the other thread caught, checked after it joined
  std::thread other([&] {
    inside.get_future().wait();
    const auto attempt = [&](auto&& use) {
      try {
        use();
        errors.emplace_back("no error");
      } catch (const dpipe::UsageError& error) {
        errors.emplace_back(error.what());
      }
    };
    attempt([&] { (void)loader.state_dict(); });
    attempt([&] { (void)loader.begin(); });
    attempt([&] { loader.pause(); });
    attempt([&] { (void)loader.epoch(); });
    tried.set_value();
  });
  std::vector<int> got;
  for (int x : loader) got.push_back(x);
  other.join();
  CHECK(got == range(5));  // the iterating thread was not disturbed
  const auto message = [](const std::string& operation) {
    return "DataLoader2: " + operation +
           " was called while another thread is using the loader; a DataLoader2 is used by one thread at a time: "
           "give each thread its own loader, or guard it with a mutex";
  };
  CHECK(errors ==
        std::vector<std::string>{message("state_dict"), message("begin"), message("pause"), message("epoch")});
  // Used by one thread at a time, from several threads in turn, it works.
  std::thread later([&] { loader.seed(1); });
  later.join();
  CHECK(dpipe::testing::epoch(loader).size() == 5);
}

}  // namespace

namespace {

/// A checkpointable service of a user's that describes itself.
class DescribedService final
    : public dpipe::ReadingService<DescribedService, dpipe::CheckpointableReadingServiceInterface> {
 public:
  dpipe::DataPipePtr initialize(dpipe::DataPipePtr graph) override { return graph; }
  [[nodiscard]] std::string describe() const override { return "my cluster's service, 3 hosts"; }
  void checkpoint(dpipe::StateWriter& writer) override { writer.write("hosts", std::uint64_t{3}); }
  dpipe::DataPipePtr restore(dpipe::DataPipePtr graph, const dpipe::StateReader& reader) override {
    (void)reader.read<std::uint64_t>("hosts");
    return graph;
  }
};

// What each service may append to a loader's root, which DataLoader2 reads from its type.
static_assert(!dpipe::MultiProcessingReadingService::kRootOps.prefetch &&
              !dpipe::MultiProcessingReadingService::kRootOps.fullsync);
static_assert(InProcessReadingService::kRootOps.prefetch && !InProcessReadingService::kRootOps.fullsync);
static_assert(!dpipe::DistributedReadingService::kRootOps.prefetch &&
              dpipe::DistributedReadingService::kRootOps.fullsync);
static_assert(PlainService::kRootOps.prefetch && PlainService::kRootOps.fullsync);

TEST_CASE("Reading services: describe() names the service in checkpoints and their errors", "[loader][protocol]") {
  CHECK(PlainService().describe() == "(anonymous namespace)::PlainService");
  CHECK(InProcessReadingService().describe() == "dpipe::InProcessReadingService");
  CHECK(dpipe::MultiProcessingReadingService({.num_workers = 3}).describe() ==
        "dpipe::MultiProcessingReadingService with 3 worker processes");
  DataLoader2<int> loader(iter::from(range(10)), DescribedService());
  auto it = loader.begin();
  ++it;
  const auto blob = loader.state_dict();
  CHECK(dpipe::StateStore::from_blob(blob).find("loader:service")->value ==
        dpipe::to_bytes(std::string("my cluster's service, 3 hosts")));
  DataLoader2<int> plain(iter::from(range(10)));
  CHECK_THROWS_MATCHES(plain.load_state_dict(blob), dpipe::StateError,
                       Catch::Message("the checkpoint was saved by a loader with my cluster's service, 3 hosts, this "
                                      "loader has no reading service: it cannot restore the state of that service "
                                      "(its worker processes); build the loader with the reading service the "
                                      "checkpoint was saved with (the same worker count) to resume it"));
  DataLoader2<int> same(iter::from(range(10)), DescribedService());
  same.load_state_dict(blob);
  CHECK(dpipe::testing::epoch(same) == range(1, 10));
}

}  // namespace

// Exact checkpoints with worker processes (SPEC §9): the restore sweep of the in-process tests with
// 1 and 2 workers and with a dispatching process; restoring does not replay; a checkpoint from
// another worker count is refused.

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/battery.hpp"
#include "support/corruption.hpp"
#include "support/loader.hpp"
#include "support/loader_fuzz.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::DataLoader2;
using dpipe::MultiProcessingOptions;
using dpipe::MultiProcessingReadingService;
using dpipe::testing::epoch;
using dpipe::testing::mix;
using dpipe::testing::range;
using dpipe::testing::workers;
using Batch = std::vector<int>;

/// Elements below this value must not be computed: set before a restored loader forks its workers.
int g_replay_guard = -1;

enum class Spread { kShardingFilter, kDispatch, kMixed, kMainTail };

/// kMixed runs threadpool_map, fork + zip and prefetch inside each worker, as the in-process sweep
/// of test_checkpoint.cpp does.
dpipe::IterPipe<Batch> make_pipeline(Spread spread) {
  auto source = iter::from(range(180)).shuffle(16);
  switch (spread) {
    case Spread::kShardingFilter:
      return source.sharding_filter().map([](int x) { return mix(x, 3, 0); }).batch(4);
    case Spread::kDispatch:
      return source.sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing)
          .map([](int x) { return mix(x, 3, 0); })
          .batch(4);
    case Spread::kMainTail:  // fullsync is not replicable: it, the prefetch and the batch run in the main process
      return source.sharding_filter().map([](int x) { return mix(x, 3, 0); }).fullsync().prefetch(3).batch(4);
    default: {
      auto forks =
          source.sharding_filter().threadpool_map([](int x) { return mix(x, 3, 0); }, 2, 6).enumerate().fork(2, 64);
      return forks[0]
          .map([](auto pair) { return static_cast<int>(pair.first); })
          .zip(forks[1].map([](auto pair) { return pair.second; }))
          .map([](auto pair) { return mix(std::get<0>(pair), 1000, std::get<1>(pair)); })
          .prefetch(5)
          .batch(4);
    }
  }
}

TEST_CASE("MP checkpoint: restored at every position it continues exactly / the next epoch too", "[mp][checkpoint]") {
  struct Setup {
    std::size_t workers;
    Spread spread;
    const char* what;
  };
  for (const Setup setup :
       {Setup{1, Spread::kShardingFilter, "sharding_filter"}, Setup{2, Spread::kShardingFilter, "sharding_filter"},
        Setup{2, Spread::kDispatch, "a dispatching process"},
        Setup{1, Spread::kMixed, "threadpool_map, fork + zip and prefetch in the workers"},
        Setup{2, Spread::kMixed, "threadpool_map, fork + zip and prefetch in the workers"},
        Setup{2, Spread::kMainTail, "a prefetch in the main process, after the workers"}}) {
    INFO(setup.workers << " workers, " << setup.what);
    const auto first = dpipe::testing::check_restore_sweep(
        [&] { return DataLoader2<Batch>(make_pipeline(setup.spread), workers(setup.workers)); });
    CHECK(first.size() >= 45);  // each worker batches its own shard
  }
}

/// 120 ints, shuffled, spread to the workers by `spread` and batched; `with_maps` adds two
/// stateless maps (identities), one in the stream of elements and one on the batches.
dpipe::IterPipe<Batch> augmented(Spread spread, bool with_maps) {
  auto source = iter::from(range(120)).shuffle(16);
  auto spread_out = spread == Spread::kDispatch
                        ? source.sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing)
                        : source.sharding_filter();
  if (!with_maps) return spread_out.batch(4);
  return spread_out.map([](int x) { return x; }).batch(4).map([](Batch batch) { return batch; });
}

TEST_CASE("MP checkpoint: a checkpoint restores into a pipeline that gained or lost a stateless map",
          "[mp][checkpoint]") {
  struct Setup {
    std::size_t workers;
    Spread spread;
  };
  for (const Setup setup :
       {Setup{0, Spread::kShardingFilter}, Setup{2, Spread::kShardingFilter}, Setup{2, Spread::kDispatch}}) {
    INFO(setup.workers << " workers" << (setup.spread == Spread::kDispatch ? ", a dispatching process" : ""));
    const auto make = [&](bool with_maps) {
      auto pipe = augmented(setup.spread, with_maps);
      return setup.workers == 0 ? DataLoader2<Batch>(pipe, dpipe::InProcessReadingService())
                                : DataLoader2<Batch>(pipe, workers(setup.workers));
    };
    auto reference = make(false);
    reference.seed(7);
    const auto first = epoch(reference);
    const auto second = epoch(reference);
    REQUIRE(first.size() == 30);
    for (const bool saved_with_maps : {false, true}) {
      INFO("saved " << (saved_with_maps ? "with" : "without") << " the maps");
      std::vector<std::byte> state;
      {
        auto loader = make(saved_with_maps);
        loader.seed(7);
        auto it = loader.begin();
        for (int taken = 0; taken < 5; ++taken) ++it;
        state = loader.state_dict();
      }
      auto restored = make(!saved_with_maps);
      restored.load_state_dict(state);
      CHECK(epoch(restored) == std::vector<Batch>(first.begin() + 5, first.end()));
      CHECK(epoch(restored) == second);
    }
  }
}

TEST_CASE("MP checkpoint: a checkpoint from worker processes in an in-process loader / and back say what to do",
          "[mp][checkpoint]") {
  const auto pipe = [] { return iter::from(range(60)).shuffle(10).sharding_filter(); };
  const auto saved_after_3 = [](DataLoader2<int> loader) {
    loader.seed(1);
    auto it = loader.begin();
    for (int i = 0; i < 3; ++i) ++it;
    return loader.state_dict();
  };
  const auto with_workers = saved_after_3(DataLoader2<int>(pipe(), workers(2)));
  const auto in_process = saved_after_3(DataLoader2<int>(pipe(), dpipe::InProcessReadingService()));
  const auto no_service = saved_after_3(DataLoader2<int>(pipe()));
  const std::string advice =
      "; build the loader with the reading service the checkpoint was saved with (the same worker count) to "
      "resume it";

  DataLoader2<int> in_process_loader(pipe(), dpipe::InProcessReadingService());
  CHECK_THROWS_MATCHES(in_process_loader.load_state_dict(with_workers), dpipe::StateError,
                       Catch::Message("the checkpoint was saved by a loader with dpipe::MultiProcessingReadingService "
                                      "with 2 worker processes, this loader has dpipe::InProcessReadingService: it "
                                      "cannot restore the state of that service (its worker processes)" +
                                      advice));
  DataLoader2<int> plain_loader(pipe());
  CHECK_THROWS_MATCHES(plain_loader.load_state_dict(with_workers), dpipe::StateError,
                       Catch::Message("the checkpoint was saved by a loader with dpipe::MultiProcessingReadingService "
                                      "with 2 worker processes, this loader has no reading service: it cannot "
                                      "restore the state of that service (its worker processes)" +
                                      advice));
  DataLoader2<int> workers_loader(pipe(), workers(2));
  CHECK_THROWS_MATCHES(workers_loader.load_state_dict(in_process), dpipe::StateError,
                       Catch::Message("the checkpoint was saved by a loader with dpipe::InProcessReadingService, this "
                                      "loader has dpipe::MultiProcessingReadingService with 2 worker processes: the "
                                      "checkpoint holds no state for this service (its worker processes)" +
                                      advice));
  CHECK_THROWS_MATCHES(workers_loader.load_state_dict(no_service), dpipe::StateError,
                       Catch::Message("the checkpoint was saved by a loader with no reading service, this loader has "
                                      "dpipe::MultiProcessingReadingService with 2 worker processes: the checkpoint "
                                      "holds no state for this service (its worker processes)" +
                                      advice));
  DataLoader2<int> plain(pipe());  // in process with or without the service: the same graph
  plain.load_state_dict(in_process);
  CHECK(dpipe::testing::epoch(plain).size() == 57);
}

TEST_CASE("MP checkpoint: restoring does not replay what the workers computed", "[mp][checkpoint]") {
  const auto make_loader = [] {
    auto pipe = iter::from(range(400)).sharding_filter().map([](int x) {
      if (x < g_replay_guard) throw std::logic_error("element " + std::to_string(x) + " was computed again");
      return x;
    });
    return DataLoader2<Batch>(pipe.batch(4), workers(2));
  };
  std::vector<std::byte> state;
  {
    auto loader = make_loader();
    std::size_t taken = 0;
    for (auto& batch : loader) {
      (void)batch;
      if (++taken == 40) {
        state = loader.state_dict();
        break;
      }
    }
  }
  g_replay_guard = 160;  // the first 40 batches hold 0 .. 159
  auto restored = make_loader();
  restored.load_state_dict(state);
  std::vector<int> rest;
  for (auto& batch : restored) rest.insert(rest.end(), batch.begin(), batch.end());
  g_replay_guard = -1;
  std::sort(rest.begin(), rest.end());
  CHECK(rest == range(160, 400));
}

TEST_CASE("MP checkpoint: while paused by limit / then resumed", "[mp][checkpoint]") {
  const auto make_loader = [] {
    return DataLoader2<int>(iter::from(range(60)).shuffle().sharding_filter(), workers(3));
  };
  auto reference = make_loader();
  reference.seed(1);
  std::vector<int> expected;
  for (int x : reference) expected.push_back(x);
  auto loader = make_loader();
  loader.seed(1);
  std::vector<int> got;
  auto it = loader.begin();
  loader.limit(25);
  for (; it != loader.end(); ++it) got.push_back(*it);
  CHECK(got == std::vector<int>(expected.begin(), expected.begin() + 25));
  const auto state = loader.state_dict();
  loader.resume();
  for (; it != loader.end(); ++it) got.push_back(*it);
  CHECK(got == std::vector<int>(expected.begin(), expected.begin() + 50));

  auto restored = make_loader();
  restored.load_state_dict(state);
  auto restored_it = restored.begin();
  CHECK(restored_it == restored.end());  // restored paused
  restored.resume();
  std::vector<int> rest;
  for (; restored_it != restored.end(); ++restored_it) rest.push_back(*restored_it);
  CHECK(rest == std::vector<int>(expected.begin() + 25, expected.end()));
}

TEST_CASE("MP checkpoint: another worker count is refused", "[mp][checkpoint]") {
  std::vector<std::byte> state;
  {
    DataLoader2<int> loader(iter::from(range(10)).sharding_filter(), workers(2));
    auto it = loader.begin();
    ++it;
    state = loader.state_dict();
  }
  DataLoader2<int> other(iter::from(range(10)).sharding_filter(), workers(3));
  CHECK_THROWS_MATCHES(other.load_state_dict(state), dpipe::StateError,
                       Catch::Message("the checkpoint was saved with 2 worker processes; this "
                                      "MultiProcessingReadingService has 3: restore it with the same num_workers"));
  auto fresh = epoch(other);  // a refused checkpoint leaves the loader as it was
  std::ranges::sort(fresh);
  CHECK(fresh == range(10));
}

TEST_CASE("MP checkpoint: a worker node without state support falls back to replaying", "[mp][checkpoint]") {
  dpipe::testing::check_replay_fallback([] {
    return DataLoader2<int>(
        dpipe::make_iter<dpipe::testing::PlusOne>(iter::from(range(30)).shuffle(5).sharding_filter()), workers(2));
  });
}

TEST_CASE("MP checkpoint: a node without state support in the dispatching process falls back to replaying",
          "[mp][checkpoint]") {
  dpipe::testing::check_replay_fallback([] {
    auto dispatched = dpipe::make_iter<dpipe::testing::PlusOne>(iter::from(range(30)).shuffle(5))
                          .sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing);
    return DataLoader2<int>(dispatched.map([](int x) { return x; }), workers(2));
  });
}

TEST_CASE("MP checkpoint: corruptions behind valid checksums are refused or restore / never crash",
          "[mp][checkpoint][fuzz]") {
  // The blob holds every child's fields behind one checksum, recomputed after each corruption so
  // that each process decodes hostile bytes. Whichever process refuses its part, load_state_dict()
  // throws StateError.
  std::vector<std::byte> blob;
  {
    DataLoader2<Batch> source(make_pipeline(Spread::kDispatch), workers(2));
    auto it = source.begin();
    for (int i = 0; i < 5; ++i) ++it;
    blob = source.state_dict();
  }
  const auto outcome = dpipe::testing::fuzz_resealed(
      blob, 77, 150, [] { return DataLoader2<Batch>(make_pipeline(Spread::kDispatch), workers(2)); });
  CHECK(outcome.refused > 0);
  CHECK(outcome.restored > 0);
  CHECK(outcome.refused + outcome.restored == 150);
}

/// A child's progress as its checkpoint field holds it (process:progress).
struct SavedProgress {
  std::uint64_t generation = 0;
  bool active = false;
  bool ended = false;
  bool failed = false;
  std::uint64_t dealt = 0;
  DPIPE_FIELDS(generation, active, ended, failed, dealt)
};

TEST_CASE("MP checkpoint: a worker's inconsistent progress is refused at load instead of hanging", "[mp][checkpoint]") {
  // Each worker yields 100000 elements, far more than it sends ahead (its prefetch counts, or
  // 64 KiB of small elements): worker 1 is mid-stream.
  const auto pipe = [] { return iter::from(range(200000)).sharding_filter(); };
  std::vector<std::byte> blob;
  {
    DataLoader2<int> loader(pipe(), workers(2));
    auto it = loader.begin();
    for (int i = 0; i < 3; ++i) ++it;
    blob = loader.state_dict();
  }
  const std::string key = "service/worker1/process:progress";
  auto edited = dpipe::from_bytes<SavedProgress>(dpipe::testing::field_value(blob, key));
  REQUIRE((edited.generation == 1 && edited.active && !edited.ended && !edited.failed));
  const auto load = [&] {
    DataLoader2<int> target(pipe(), workers(2));
    target.load_state_dict(dpipe::testing::with_field(blob, key, dpipe::to_bytes(edited)));
  };
  // What the merge of the main process never saw: an end, or an error.
  const auto unseen = [&](const char* restored) {
    return Catch::Message(
        fmt::format("graph/merge_workers: the checkpoint is inconsistent: worker process 1 restored "
                    "{}, but the merge holds no end and no error of it (a blob edited or put "
                    "together from several checkpoints?)",
                    restored));
  };
  SECTION("an end the merge never saw") {
    edited.ended = true;
    CHECK_THROWS_MATCHES(load(), dpipe::StateError, unseen("an ended epoch"));
  }
  SECTION("an error the merge never saw") {
    edited.failed = true;
    CHECK_THROWS_MATCHES(load(), dpipe::StateError, unseen("a failed epoch"));
  }
  SECTION("no epoch") {
    edited.active = false;
    CHECK_THROWS_MATCHES(
        load(), dpipe::StateError,
        Catch::Message("worker process 1 cannot restore the checkpoint: the checkpoint's field process:progress is "
                       "inconsistent: generation 1, active false, ended false, failed false in a process group at "
                       "generation 1"));
  }
  SECTION("another epoch") {
    edited.generation = 2;
    CHECK_THROWS_MATCHES(
        load(), dpipe::StateError,
        Catch::Message("worker process 1 cannot restore the checkpoint: the checkpoint's field process:progress is "
                       "inconsistent: generation 2, active true, ended false, failed false in a process group at "
                       "generation 1"));
  }
  SECTION("both ended and failed") {
    edited.ended = edited.failed = true;
    CHECK_THROWS_AS(load(), dpipe::StateError);
  }
}

TEST_CASE("MP checkpoint: a second load_state_dict replaces the first and ends its workers", "[mp][checkpoint]") {
  const auto pipe = [] { return iter::from(range(100)).shuffle().sharding_filter(); };
  std::vector<std::byte> after_3;
  std::vector<std::byte> after_7;
  std::vector<int> expected;
  {
    DataLoader2<int> loader(pipe(), workers(2));
    loader.seed(5);
    for (const int x : loader) {
      expected.push_back(x);
      if (expected.size() == 3) after_3 = loader.state_dict();
      if (expected.size() == 7) after_7 = loader.state_dict();
    }
  }
  DataLoader2<int> target(pipe(), workers(2));
  target.load_state_dict(after_3);
  const auto first_workers = dynamic_cast<MultiProcessingReadingService&>(*target.reading_service()).worker_pids();
  REQUIRE(first_workers.size() == 2);
  target.load_state_dict(after_7);
  for (const pid_t worker : first_workers) CHECK((kill(worker, 0) == -1 && errno == ESRCH));  // reaped
  CHECK(epoch(target) == std::vector<int>(expected.begin() + 7, expected.end()));
}

TEST_CASE("MP checkpoint: a worker's pipeline with other settings is refused at load before any element",
          "[mp][checkpoint]") {
  const auto pipe = [](std::size_t buffer_size) {
    return iter::from(range(5000)).shuffle(buffer_size).sharding_filter();
  };
  std::vector<std::byte> blob;
  {
    DataLoader2<int> loader(pipe(1000), workers(2));
    auto it = loader.begin();
    for (int i = 0; i < 25; ++i) ++it;
    blob = loader.state_dict();
  }
  DataLoader2<int> target(pipe(100), workers(2));
  CHECK_THROWS_MATCHES(target.load_state_dict(blob), dpipe::StateError,
                       Catch::Message("the checkpoint was saved from a pipeline with other settings (sharding_filter/"
                                      "shuffle: buffer_size 1000 in the checkpoint, 100 here); restore it into a "
                                      "loader built with the same settings"));
}

TEST_CASE("MP checkpoint: saved after a worker threw it restores the position of the last element handed out",
          "[mp][checkpoint]") {
  dpipe::testing::check_checkpoint_after_failure(
      [](const dpipe::IterPipe<int>& pipe) { return DataLoader2<int>(pipe, dpipe::testing::workers(2)); });
}

/// A record the merge of the workers stores for a worker ("graph/merge_workers/input<i>:stored"):
/// its kind (1: an element) and its encoded bytes.
struct StoredRecord {
  std::uint8_t kind = 0;
  std::vector<std::byte> bytes;
  DPIPE_FIELDS(kind, bytes)
};

/// The elements the merge of the workers stores for worker `worker` in the checkpoint `state`.
std::vector<std::vector<std::byte>> stored_elements(const std::vector<std::byte>& state, std::size_t worker) {
  const auto store = dpipe::StateStore::from_blob(state);
  const auto* field = store.find(fmt::format("graph/merge_workers/input{}:stored", worker));
  REQUIRE(field != nullptr);
  std::vector<std::vector<std::byte>> elements;
  for (auto& record : dpipe::from_bytes<std::vector<StoredRecord>>(field->value)) {
    if (record.kind == 1) elements.push_back(std::move(record.bytes));
  }
  return elements;
}

TEST_CASE("MP checkpoint: frequent saves keep what the main process holds for a worker within its budget",
          "[mp][checkpoint]") {
  // A save moves what a worker queued into the merge's storage; until the main process takes them
  // those elements count against the worker's budget, so storage and queue together never hold
  // more than the budget: the prefetch counts (10 + 10 / 2 = 15 elements), or all but the last
  // element within the small elements' allowance (64 KiB, each counting its 8-byte record header
  // and its payload padded to 8 bytes; a thread's elements count more).
  constexpr std::size_t kPrefetchBudget = 15;
  constexpr std::size_t kAllowance = std::size_t{64} << 10;
  const auto within_budget = [&](const std::vector<std::vector<std::byte>>& elements) {
    std::size_t bytes = 0;
    for (std::size_t i = 0; i + 1 < elements.size(); ++i) bytes += 8 + (elements[i].size() + 7) / 8 * 8;
    return elements.size() <= kPrefetchBudget || bytes < kAllowance;
  };
  const auto make_pipeline = [] {
    return iter::from(range(60000)).shuffle(64).sharding_filter().map([](int x) { return mix(x, 3, 0); }).batch(16);
  };
  for (const auto kind : {dpipe::WorkerKind::kProcess, dpipe::WorkerKind::kThread}) {
    INFO((kind == dpipe::WorkerKind::kProcess ? "worker processes" : "worker threads"));
    const auto make = [&] {
      return DataLoader2<Batch>(make_pipeline(),
                                MultiProcessingReadingService({.num_workers = 2, .worker_kind = kind}));
    };
    auto reference = make();
    reference.seed(7);
    const auto first = epoch(reference);
    REQUIRE(first.size() == 60000 / 16);

    auto loader = make();
    loader.seed(7);
    std::vector<std::byte> late;
    std::size_t taken = 0;
    auto it = loader.begin();
    for (int save = 1; save <= 50; ++save) {
      for (int i = 0; i < 3; ++i, ++it, ++taken) REQUIRE(*it == first[taken]);
      const auto state = loader.state_dict();
      for (std::size_t worker = 0; worker < 2; ++worker) {
        INFO("save " << save << ", worker " << worker);
        CHECK(within_budget(stored_elements(state, worker)));
      }
      if (save == 45) late = state;
    }
    std::vector<Batch> rest;
    for (; it != loader.end(); ++it) rest.push_back(*it);
    CHECK(rest == std::vector<Batch>(first.begin() + 150, first.end()));

    // Restored, the workers refill their queues before the merge loads what the checkpoint stored,
    // so a save soon after a restore may hold both; once the loop has taken the restored ones (at
    // most 820 batches of 80 bytes per worker), saves keep within the budget again.
    auto restored = make();
    restored.load_state_dict(late);
    std::vector<Batch> resumed;
    auto restored_it = restored.begin();
    for (int i = 0; i < 1900; ++i, ++restored_it) resumed.push_back(*restored_it);
    const auto after_restore = restored.state_dict();
    for (std::size_t worker = 0; worker < 2; ++worker) {
      INFO("saved after the restore, worker " << worker);
      CHECK(within_budget(stored_elements(after_restore, worker)));
    }
    for (; restored_it != restored.end(); ++restored_it) resumed.push_back(*restored_it);
    CHECK(resumed == std::vector<Batch>(first.begin() + 135, first.end()));
    CHECK(epoch(restored) == epoch(reference));
  }
}

}  // namespace

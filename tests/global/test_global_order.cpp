// The global order in one process and with workers: known outputs, the schedule's arithmetic,
// invariance over worker counts and kinds, per-sample seeds, checkpoints that restore onto another
// worker count, and the errors of bad input.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "global/global_jobs.hpp"
#include "support/log_capture.hpp"

namespace {

using dpipe::GlobalOrderOptions;
using dpipe::testing::JobShape;
using dpipe::testing::run_job;
using Batch = std::vector<std::int64_t>;

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

/// Shuffled, mapped.
dpipe::IterPipe<std::int64_t> mapped(std::int64_t n = 100) {
  return dpipe::global_order(iota(n)).map([](std::int64_t x) { return x * 10 + 1; });
}

/// Shuffled, filtered, and expanded: multiples of 5 yield x and -x.
dpipe::IterPipe<std::int64_t> filtered_expanded(std::int64_t n = 100) {
  return dpipe::global_order(iota(n)).filter([](std::int64_t x) { return x % 3 != 0; }).flatmap([](std::int64_t x) {
    return x % 5 == 0 ? Batch{x, -x} : Batch{x};
  });
}

/// Shuffled, filtered, batched by 7 positions.
dpipe::IterPipe<Batch> batched(std::int64_t n = 100) {
  return dpipe::global_order(iota(n)).filter([](std::int64_t x) { return x % 4 != 1; }).batch(7);
}

const std::vector<JobShape> kWorkerShapes = {
    {0, 1, dpipe::WorkerKind::kProcess}, {0, 2, dpipe::WorkerKind::kProcess}, {0, 3, dpipe::WorkerKind::kProcess},
    {0, 4, dpipe::WorkerKind::kProcess}, {0, 1, dpipe::WorkerKind::kThread},  {0, 2, dpipe::WorkerKind::kThread},
    {0, 3, dpipe::WorkerKind::kThread},  {0, 4, dpipe::WorkerKind::kThread},
};

}  // namespace

TEST_CASE("global schedule: steps dealt to ranks / then to workers / with the tail dropped or padded", "[global]") {
  using dpipe::GlobalLayout;
  using dpipe::GlobalSchedule;
  // 10 positions in steps of 3: steps 0..3, the last spans [9, 10).
  const GlobalSchedule one(10, 3, false, dpipe::EpochTail::kDrop, GlobalLayout{}, 0);
  CHECK(one.total_steps() == 4);
  CHECK(one.owned_steps() == 4);
  CHECK(one.positions(3) == std::pair<std::uint64_t, std::uint64_t>{9, 10});
  CHECK(one.owned_positions() == 10);
  CHECK(GlobalSchedule(10, 3, true, dpipe::EpochTail::kDrop, GlobalLayout{}, 0).total_steps() == 3);

  // 3 ranks: 4 steps make one whole round; the 4th step is dropped, or padded with steps 0 and 1.
  const GlobalSchedule rank1(10, 3, false, dpipe::EpochTail::kDrop, GlobalLayout{3, 1, 1, 0}, 0);
  CHECK(rank1.rank_steps() == 1);
  CHECK(rank1.owned_step(0) == 1);
  const GlobalSchedule padded(10, 3, false, dpipe::EpochTail::kPad, GlobalLayout{3, 2, 1, 0}, 0);
  CHECK(padded.rank_steps() == 2);
  CHECK(padded.owned_step(1) == 5);
  CHECK(padded.positions(5) == std::pair<std::uint64_t, std::uint64_t>{3, 6});

  // Rank 1 of 2, worker 1 of 2, from step 4 on, 20 steps: rank 1 has steps 5 7 9 ... 19 (8),
  // worker 1 every other one of them: 7 11 15 19.
  const GlobalSchedule worker(40, 2, false, dpipe::EpochTail::kDrop, GlobalLayout{2, 1, 2, 1}, 4);
  CHECK(worker.rank_steps() == 8);
  REQUIRE(worker.owned_steps() == 4);
  CHECK(std::vector<std::uint64_t>{worker.owned_step(0), worker.owned_step(1), worker.owned_step(2),
                                   worker.owned_step(3)} == std::vector<std::uint64_t>{7, 11, 15, 19});

  CHECK(GlobalSchedule(0, 4, false, dpipe::EpochTail::kPad, GlobalLayout{2, 0, 1, 0}, 0).owned_steps() == 0);
  CHECK_THROWS_WITH(GlobalSchedule(10, 0, false, dpipe::EpochTail::kDrop, GlobalLayout{}, 0),
                    "a global order's step spans at least one position");
}

TEST_CASE("global_order: known output in index order / batched by positions", "[global]") {
  const GlobalOrderOptions in_order{.shuffle = false};
  dpipe::DataLoader2<std::int64_t> plain(dpipe::global_order(iota(6), in_order).in_order());
  CHECK(dpipe::testing::read_epoch(plain) == iota(6));

  // Positions 1 and 5 are filtered out: their batches are shorter, not refilled.
  auto odd_out = dpipe::global_order(iota(10), in_order).filter([](std::int64_t x) { return x != 1 && x != 5; });
  dpipe::DataLoader2<Batch> batches(odd_out.batch(4));
  CHECK(dpipe::testing::read_epoch(batches) == std::vector<Batch>{{0, 2, 3}, {4, 6, 7}, {8, 9}});
  CHECK(batches.epoch_length() == 3);

  dpipe::DataLoader2<Batch> dropped(dpipe::global_order(iota(10), in_order).batch(4, /*drop_last=*/true));
  CHECK(dpipe::testing::read_epoch(dropped) == std::vector<Batch>{{0, 1, 2, 3}, {4, 5, 6, 7}});

  // A step whose elements were all filtered out is an empty batch: every step yields one.
  dpipe::DataLoader2<Batch> empty(
      dpipe::global_order(iota(6), in_order).filter([](std::int64_t x) { return x >= 4; }).batch(2));
  CHECK(dpipe::testing::read_epoch(empty) == std::vector<Batch>{{}, {}, {4, 5}});

  dpipe::DataLoader2<std::int64_t> none(dpipe::global_order(std::vector<std::int64_t>{}).in_order());
  CHECK(dpipe::testing::read_epoch(none).empty());
}

TEST_CASE("global_order: a new permutation every epoch / the same for the same seed", "[global]") {
  dpipe::DataLoader2<std::int64_t> loader(mapped(1000));
  loader.seed(7);
  const auto first = dpipe::testing::read_epoch(loader);
  const auto second = dpipe::testing::read_epoch(loader);
  auto sorted = first;
  std::ranges::sort(sorted);
  std::vector<std::int64_t> expected;
  for (std::int64_t x = 0; x < 1000; ++x) expected.push_back(x * 10 + 1);
  CHECK(sorted == expected);
  CHECK(first != expected);
  CHECK(first != second);

  dpipe::DataLoader2<std::int64_t> again(mapped(1000));
  again.seed(7);
  CHECK(dpipe::testing::read_epoch(again) == first);
  CHECK(dpipe::testing::read_epoch(again) == second);
  again.seed(8);
  CHECK(dpipe::testing::read_epoch(again) != first);
}

TEST_CASE("global_order: the same data with 1 to 4 worker processes or threads / over two epochs",
          "[global][concurrency]") {
  const auto check = [](const auto& make_pipe) {
    const auto reference = run_job(std::function(make_pipe), JobShape{}, 11, 2);
    REQUIRE(reference.ranks[0][0].size() > 10);
    CHECK(reference.ranks[0][0] != reference.ranks[0][1]);
    for (const auto& shape : kWorkerShapes) {
      INFO(shape.name());
      const auto run = run_job(std::function(make_pipe), shape, 11, 2);
      CHECK(run.ranks[0] == reference.ranks[0]);
    }
  };
  check([] { return mapped(); });
  check([] { return filtered_expanded(); });
  check([] { return batched(); });
}

TEST_CASE("global_order: map_random draws by source index / whatever the workers and filters",
          "[global][concurrency]") {
  const auto draw = [](std::int64_t x, dpipe::SampleRandom& random) {
    return x * 1000 + static_cast<std::int64_t>(std::uniform_int_distribution<int>(0, 999)(random));
  };
  const std::function<dpipe::IterPipe<std::int64_t>()> all = [&] {
    return dpipe::global_order(iota(60)).map_random(draw);
  };
  const std::function<dpipe::IterPipe<std::int64_t>()> some = [&] {
    return dpipe::global_order(iota(60)).filter([](std::int64_t x) { return x % 2 == 0; }).map_random(draw);
  };
  const auto reference = run_job(all, JobShape{}, 5, 2);
  const auto threads = run_job(all, JobShape{0, 3, dpipe::WorkerKind::kThread}, 5, 2);
  CHECK(threads.ranks[0] == reference.ranks[0]);
  // Draws differ across elements and epochs.
  std::set<std::int64_t> draws;
  for (const auto& epoch : reference.ranks[0]) {
    for (const std::int64_t value : epoch) draws.insert(value % 1000);
  }
  CHECK(draws.size() > 50);
  CHECK(reference.ranks[0][0] != reference.ranks[0][1]);
  // What the filter keeps draws what it drew without the filter.
  const auto filtered = run_job(some, JobShape{0, 2, dpipe::WorkerKind::kProcess}, 5, 2);
  for (std::size_t e = 0; e < 2; ++e) {
    std::vector<std::int64_t> kept;
    std::ranges::copy_if(reference.ranks[0][e], std::back_inserter(kept),
                         [](std::int64_t value) { return (value / 1000) % 2 == 0; });
    CHECK(filtered.ranks[0][e] == kept);
  }
}

TEST_CASE("global_order: a checkpoint at 0 / 1 / 4 / inside an expansion / and at the end restores onto other workers",
          "[global][concurrency]") {
  const std::function<dpipe::IterPipe<std::int64_t>()> make = [] { return filtered_expanded(); };
  const auto reference = run_job(make, JobShape{}, 3, 2);
  const auto& first = reference.ranks[0][0];
  // Inside an expansion: after x of a multiple of 5, before its -x.
  const auto expansion = std::ranges::find_if(first, [](std::int64_t x) { return x > 0 && x % 5 == 0; });
  REQUIRE(expansion != first.end());
  const auto inside = static_cast<std::size_t>(expansion - first.begin()) + 1;
  const std::vector<JobShape> from = {JobShape{}, JobShape{0, 2, dpipe::WorkerKind::kThread},
                                      JobShape{0, 3, dpipe::WorkerKind::kProcess}};
  const std::vector<JobShape> onto = {JobShape{}, JobShape{0, 1, dpipe::WorkerKind::kProcess},
                                      JobShape{0, 4, dpipe::WorkerKind::kThread}};
  for (const std::size_t at : {std::size_t{0}, std::size_t{1}, std::size_t{4}, inside, first.size()}) {
    for (const auto& saved : from) {
      const auto stopped = run_job(make, saved, 3, 1, at);
      REQUIRE(stopped.ranks[0][0] ==
              std::vector<std::int64_t>(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(at)));
      for (const auto& restored : onto) {
        INFO("after " << at << " from " << saved.name() << " onto " << restored.name());
        const auto resumed = run_job(make, restored, 3, 2, std::nullopt, stopped.checkpoint);
        CHECK(resumed.ranks[0][0] ==
              std::vector<std::int64_t>(first.begin() + static_cast<std::ptrdiff_t>(at), first.end()));
        CHECK(resumed.ranks[0][1] == reference.ranks[0][1]);  // and the next epoch
      }
    }
  }
}

TEST_CASE("global_order: without a seed a checkpoint still restores onto other workers", "[global][concurrency]") {
  dpipe::DataLoader2<Batch> saved(batched());
  const auto first = dpipe::testing::read_epoch(saved);
  auto it = saved.begin();
  for (int i = 0; i < 3; ++i) ++it;
  const auto state = saved.state_dict();
  std::vector<Batch> rest;
  for (; it != saved.end(); ++it) rest.push_back(*it);
  REQUIRE(rest.size() == first.size() - 3);

  dpipe::DataLoader2<Batch> restored(
      batched(), dpipe::MultiProcessingReadingService({.num_workers = 3, .worker_kind = dpipe::WorkerKind::kThread}));
  restored.load_state_dict(state);
  CHECK(dpipe::testing::read_epoch(restored) == rest);
  CHECK(restored.epoch_length() == 15);
}

TEST_CASE("global_order: a checkpoint is refused by another source size / sampler or pipeline", "[global]") {
  dpipe::DataLoader2<Batch> loader(batched(100));
  loader.seed(1);
  auto it = loader.begin();
  ++it;
  const auto state = loader.state_dict();

  dpipe::DataLoader2<Batch> bigger(batched(101));
  CHECK_THROWS_AS(bigger.load_state_dict(state), dpipe::StateError);
  dpipe::DataLoader2<Batch> unshuffled(
      dpipe::global_order(iota(100), {.shuffle = false}).filter([](std::int64_t x) { return x % 4 != 1; }).batch(7));
  CHECK_THROWS_AS(unshuffled.load_state_dict(state), dpipe::StateError);
  dpipe::DataLoader2<Batch> other_batch(
      dpipe::global_order(iota(100)).filter([](std::int64_t x) { return x % 4 != 1; }).batch(8));
  CHECK_THROWS_AS(other_batch.load_state_dict(state), dpipe::StateError);

  dpipe::DataLoader2<Batch> same(batched(100));
  same.load_state_dict(state);
  CHECK(same.elements_in_epoch() == 1);
}

TEST_CASE("global_order: a node after the end that reads too far ahead makes the checkpoint a StateError", "[global]") {
  // batch(5000) reads 5000 elements of the end before the trainer has the first of them.
  dpipe::DataLoader2<std::int64_t> loader(dpipe::global_order(iota(6000)).in_order().batch(5000).unbatch());
  loader.seed(2);
  auto it = loader.begin();
  (void)*it;
  ++it;
  CHECK_THROWS_WITH(loader.state_dict(), Catch::Matchers::StartsWith("global_order_out#") &&
                                             Catch::Matchers::EndsWith(
                                                 ": the trainer has had 1 elements of the epoch, and this node yielded "
                                                 "5000 (4096 remembered back); a node between it and the loader reads "
                                                 "too far ahead for a global-order checkpoint"));
}

TEST_CASE("global_order: one batch size per global order / a shuffle after its end is reported", "[global]") {
  auto pipe = dpipe::global_order(iota(10));
  (void)pipe.batch(4);
  CHECK_THROWS_WITH(pipe.batch(5),
                    "global_order: its steps already span 4 positions; one global order has one "
                    "batch size: build another global_order() for another batch");

  dpipe::testing::LogCapture log;
  dpipe::DataLoader2<std::int64_t> loader(dpipe::global_order(iota(10)).in_order().shuffle(4));
  (void)dpipe::testing::read_epoch(loader);
  const auto messages = log.messages();
  CHECK(std::ranges::any_of(messages, [](const std::string& message) {
    return message.starts_with("DataLoader2: shuffle") &&
           message.ends_with(
               " is random and follows the global order's end: each rank draws its own, so its output "
               "depends on the world size (docs/determinism.md)");
  }));
}

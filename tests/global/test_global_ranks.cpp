// The global order across the ranks of a distributed job (ranks as threads of this process over a
// real TcpStore, each with worker processes or threads): the ranks' steps interleaved are the
// single process's stream, and one rank's checkpoint restores the job onto another world size and
// worker count.

#include <cstdint>
#include <numeric>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "global/global_jobs.hpp"

namespace {

using dpipe::testing::interleaved;
using dpipe::testing::JobShape;
using dpipe::testing::run_job;
using Batch = std::vector<std::int64_t>;
constexpr auto kProcess = dpipe::WorkerKind::kProcess;
constexpr auto kThread = dpipe::WorkerKind::kThread;
// The ranks here are threads of one process: each forks its worker processes while the other
// ranks' threads and the store's allocate. The sanitizer runtimes of GCC 12 cannot fork so: a child
// may inherit a lock of their allocator held, and wait on it forever (seen under both, in about one
// run in four; never in the normal build). Under a sanitizer these jobs use worker threads; the
// normal build runs every shape, and worker processes run under the sanitizers in one-rank tests.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr auto kForked = kThread;
#else
constexpr auto kForked = kProcess;
#endif

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

/// 100 positions, shuffled, filtered, in 15 steps of 7 (the last spans 2).
dpipe::IterPipe<Batch> batched() {
  return dpipe::global_order(iota(100)).filter([](std::int64_t x) { return x % 4 != 1; }).batch(7);
}

/// The first `count` steps of `steps` from `first` on that make whole rounds of `world`.
template <class T>
std::vector<T> dealt(const std::vector<T>& steps, std::size_t first, std::size_t world) {
  const std::size_t rest = steps.size() > first ? steps.size() - first : 0;
  const std::size_t count = rest / world * world;
  return {steps.begin() + static_cast<std::ptrdiff_t>(first),
          steps.begin() + static_cast<std::ptrdiff_t>(first + count)};
}

}  // namespace

TEST_CASE("global_order across ranks: the ranks' steps interleaved are the single process's / in every epoch",
          "[global][distributed][concurrency]") {
  const std::function<dpipe::IterPipe<Batch>()> make_batched = batched;
  const std::function<dpipe::IterPipe<std::int64_t>()> make_mapped = [] {
    return dpipe::IterPipe<std::int64_t>(dpipe::global_order(iota(50)).map([](std::int64_t x) { return x + 1000; }));
  };
  const auto batches = run_job(make_batched, JobShape{}, 21, 2);
  const auto elements = run_job(make_mapped, JobShape{}, 21, 2);
  for (const std::size_t world : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
    std::vector<JobShape> shapes{JobShape{world, 0}};
    for (const std::size_t workers : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}}) {
      shapes.push_back(JobShape{world, workers, kThread});
      shapes.push_back(JobShape{world, workers, kForked});
    }
    for (const auto& shape : shapes) {
      INFO(shape.name());
      const auto run = run_job(make_batched, shape, 21, 2);
      for (std::size_t e = 0; e < 2; ++e) {
        CHECK(interleaved(run, e) == dealt(batches.ranks[0][e], 0, world));
        for (const auto& rank : run.ranks) CHECK(rank[e].size() == batches.ranks[0][e].size() / world);
      }
      const auto mapped = run_job(make_mapped, shape, 21, 2);
      for (std::size_t e = 0; e < 2; ++e) CHECK(interleaved(mapped, e) == dealt(elements.ranks[0][e], 0, world));
    }
  }
}

TEST_CASE("global_order across ranks: rank 0's checkpoint restores the job onto another world size and worker count",
          "[global][distributed][concurrency]") {
  const std::function<dpipe::IterPipe<Batch>()> make = batched;
  const auto reference = run_job(make, JobShape{}, 9, 2);
  const auto& epoch1 = reference.ranks[0][0];
  const auto& epoch2 = reference.ranks[0][1];
  REQUIRE(epoch1.size() == 15);
  const JobShape saved{2, 2, kForked};
  // Each rank stops after k steps: the job has delivered steps [0, 2k). k = 7 is every step the
  // two ranks yield (the 15th is the dropped tail).
  for (const std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{7}}) {
    const auto stopped = run_job(make, saved, 9, 1, k);
    REQUIRE(interleaved(stopped, 0) ==
            std::vector<Batch>(epoch1.begin(), epoch1.begin() + static_cast<std::ptrdiff_t>(2 * k)));
    for (const auto& onto : {JobShape{3, 1, kThread}, JobShape{0, 0}, JobShape{1, 4, kThread}, JobShape{1, 0}}) {
      INFO("after " << k << " steps per rank, onto " << onto.name());
      const std::size_t world = onto.world == 0 ? 1 : onto.world;
      const auto resumed = run_job(make, onto, 9, 2, std::nullopt, stopped.checkpoint);
      CHECK(interleaved(resumed, 0) == dealt(epoch1, 2 * k, world));
      CHECK(interleaved(resumed, 1) == dealt(epoch2, 0, world));
    }
  }
  // And back: from 3 ranks of 1 worker onto 2 ranks of 2.
  const auto three = run_job(make, JobShape{3, 1, kThread}, 9, 1, 2);
  const auto back = run_job(make, JobShape{2, 2, kForked}, 9, 1, std::nullopt, three.checkpoint);
  CHECK(interleaved(back, 0) == dealt(epoch1, 6, 2));
}

TEST_CASE("global_order across ranks: EpochTail::kPad fills the last round with the epoch's first steps",
          "[global][distributed][concurrency]") {
  const std::function<dpipe::IterPipe<Batch>()> make = [] {
    return dpipe::IterPipe<Batch>(dpipe::global_order(iota(100), {.tail = dpipe::EpochTail::kPad})
                                      .filter([](std::int64_t x) { return x % 4 != 1; })
                                      .batch(7));
  };
  const auto reference = run_job(make, JobShape{}, 4, 1);
  const auto& steps = reference.ranks[0][0];
  REQUIRE(steps.size() == 15);
  // 2 ranks: 8 steps each, the 16th is step 0 again; 4 ranks: 4 each, likewise.
  auto two = steps;
  two.push_back(steps[0]);
  CHECK(interleaved(run_job(make, JobShape{2, 2, kThread}, 4, 1), 0) == two);
  auto four = steps;
  four.push_back(steps[0]);
  CHECK(interleaved(run_job(make, JobShape{4, 0}, 4, 1), 0) == four);
}

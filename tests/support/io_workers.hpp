#pragma once
// check_workers: the battery of a file pipeline under a loader with two workers, as processes and
// as threads (SPEC §4: the standard battery runs for every I/O node, with workers too), and
// check_ranks_and_workers: the files of a dataset sharded across two ranks times two workers.

#include <algorithm>
#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/loader.hpp"

namespace dpipe::testing {

/// A loader over `pipe` with two workers of `kind`.
template <class T>
DataLoader2<T> two_workers(const IterPipe<T>& pipe, WorkerKind kind) {
  return DataLoader2<T>(pipe, MultiProcessingReadingService({.num_workers = 2, .worker_kind = kind}));
}

/// `values` sorted.
template <class V>
std::vector<V> sorted(std::vector<V> values) {
  std::sort(values.begin(), values.end());
  return values;
}

/// Runs `pipeline()` (a fresh graph on each call, shuffling and sharding paths before they are
/// opened) under a loader with two worker processes, then two worker threads, seeded alike. One
/// epoch, each element passed through `project`, holds exactly `expected` in some order. For each
/// breakpoint k in {0, 1, 4, end}, a loader stopped after k elements (the same as the
/// uninterrupted epoch's first k), saved and restored into a new loader yields exactly the rest
/// of the uninterrupted epoch.
template <class Pipeline, class Project = std::identity>
void check_workers(const Pipeline& pipeline, const auto& expected, const Project& project = {}) {
  using T = typename std::invoke_result_t<const Pipeline&>::value_type;
  for (const auto kind : {WorkerKind::kProcess, WorkerKind::kThread}) {
    INFO((kind == WorkerKind::kProcess ? "worker processes" : "worker threads"));
    auto loader = two_workers(pipeline(), kind);
    loader.seed(3);
    const auto first = epoch(loader, project);
    CHECK(sorted(first) == sorted(expected));
    for (const std::size_t k : std::set<std::size_t>{0, 1, 4, first.size()}) {
      INFO("saved after " << k << " elements");
      std::vector<std::byte> state;
      {
        auto stopped = two_workers(pipeline(), kind);
        stopped.seed(3);
        if (k == 0) {
          (void)stopped.begin();  // the epoch starts; nothing is taken
        } else {
          std::size_t seen = 0;
          for (const T& element : stopped) {
            CHECK(project(element) == first[seen]);
            if (++seen == k) break;
          }
        }
        state = stopped.state_dict();
      }
      auto restored = two_workers(pipeline(), kind);
      restored.load_state_dict(state);
      CHECK(epoch(restored, project) == std::vector(first.begin() + static_cast<std::ptrdiff_t>(k), first.end()));
    }
  }
}

/// Shards `pipeline()` (a fresh graph on each call, whose sharding_filter sits on paths in a fixed
/// order) across two ranks (graph::apply_sharding with ShardingPriority::kDistributed, as a
/// distributed reading service applies it) and two workers. A copy sharded by hand for (rank,
/// worker) yields exactly `expected_of(worker + 2 * rank)`: the global instance, whose files are
/// those at index i with i % 4 == worker + 2 * rank. Under a loader with two worker processes each
/// rank yields the union of its two workers, and the union over the ranks is `all`, each element
/// once.
template <class Pipeline, class ExpectedOf, class Project = std::identity>
void check_ranks_and_workers(const Pipeline& pipeline, const ExpectedOf& expected_of, const auto& all,
                             const Project& project = {}) {
  using T = typename std::invoke_result_t<const Pipeline&>::value_type;
  using P = std::decay_t<decltype(all.front())>;
  std::vector<P> everything;
  for (std::size_t rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    std::vector<P> of_rank;
    for (std::size_t worker = 0; worker < 2; ++worker) {
      INFO("worker " << worker);
      const auto copy = pipeline();
      graph::apply_sharding(copy.ptr(), 2, rank, ShardingPriority::kDistributed);
      graph::apply_sharding(copy.ptr(), 2, worker, ShardingPriority::kMultiprocessing);
      std::vector<P> got;
      for (auto& element : copy) got.push_back(project(element));
      const std::vector<P> expected = expected_of(worker + 2 * rank);
      CHECK(got == expected);
      of_rank.insert(of_rank.end(), expected.begin(), expected.end());
    }
    const auto distributed = pipeline();
    graph::apply_sharding(distributed.ptr(), 2, rank, ShardingPriority::kDistributed);
    auto loader = DataLoader2<T>(distributed, workers(2));
    const auto loaded = epoch(loader, project);
    CHECK(sorted(loaded) == sorted(of_rank));
    everything.insert(everything.end(), loaded.begin(), loaded.end());
  }
  CHECK(sorted(everything) == sorted(std::vector<P>(all.begin(), all.end())));
}

}  // namespace dpipe::testing

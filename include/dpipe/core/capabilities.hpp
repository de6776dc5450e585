#pragma once
/// \file
/// Capability interfaces: what graph functions and reading services may ask of a node besides the
/// DataPipe interface. A node opts in by also deriving from the interface; graph functions find
/// such nodes with `graph::find_dps<Interface>(graph)`.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dpipe {

/// Sharding groups (torchdata's SHARDING_PRIORITIES). DEFAULT cannot be mixed with the others;
/// DISTRIBUTED and MULTIPROCESSING combine into instance `worker + num_workers * rank`.
enum class ShardingPriority : int { kDefault = 1, kDistributed = 2, kMultiprocessing = 3 };

/// A node whose randomness the loader seeds each epoch (torchdata's `set_seed`).
/// Thread-safety: called while nothing iterates the graph.
class RandomDataPipe {
 public:
  virtual ~RandomDataPipe() = default;
  /// Seeds the next iteration only; the iteration after it draws a fresh seed unless set again.
  virtual void set_seed(std::uint64_t seed) = 0;
};

/// A random node that can become a pass-through (torchdata's `set_shuffle`).
class ShufflingDataPipe : public RandomDataPipe {
 public:
  virtual void set_shuffle(bool enabled) = 0;
};

/// A node that keeps only its share of the stream (torchdata's `apply_sharding`).
/// Thread-safety: called while nothing iterates the graph.
class ShardingDataPipe {
 public:
  virtual ~ShardingDataPipe() = default;
  virtual void apply_sharding(std::size_t num_instances, std::size_t instance_id, ShardingPriority group) = 0;
  /// Whether sharding for `group` was applied (a distributed reading service applies
  /// kDistributed). The default says no.
  [[nodiscard]] virtual bool sharded_for(ShardingPriority /*group*/) const { return false; }
};

/// What a node that keeps the ranks of a distributed job in step (fullsync) asks of the job: one
/// agreement per round. The distributed reading service implements it over its store. Every rank
/// calls agree() or fail() for the same (iteration, round) pairs in the same order.
/// Thread-safety: one thread at a time per object.
class RankSync {
 public:
  /// The outcome of a round: every rank may yield up to `bound` elements in this iteration, and
  /// `ended` tells that the iteration ends there (a rank has no more).
  struct Agreement {
    std::uint64_t bound = 0;
    bool ended = false;
  };

  virtual ~RankSync() = default;
  /// Tells the other ranks that this rank can yield `available` elements in all (`ended`: and no
  /// more), waits at most `timeout` for theirs, and returns the agreement: the least `available`
  /// of all ranks, ended if a rank with that many has no more. Throws RendezvousError naming a
  /// rank that failed or is gone, TimeoutError naming the ranks that did not arrive.
  virtual Agreement agree(std::uint64_t iteration, std::uint64_t round, std::uint64_t available, bool ended,
                          std::chrono::milliseconds timeout) = 0;
  /// Tells the other ranks, without waiting for them, that this rank failed before `round`
  /// (`reason`: what it caught): their agree() of that round throws RendezvousError naming this
  /// rank and the reason. Never throws.
  virtual void fail(std::uint64_t iteration, std::uint64_t round, const std::string& reason) noexcept = 0;
  /// The most elements a rank reads ahead for one round (its memory bound).
  [[nodiscard]] virtual std::size_t max_block() const noexcept = 0;
};

/// A node that keeps the ranks of a distributed job in step (fullsync). The distributed reading
/// service hands it the job; without one it passes its elements through.
/// Thread-safety: called while nothing iterates the graph.
class RankSyncDataPipe {
 public:
  virtual ~RankSyncDataPipe() = default;
  virtual void join_ranks(std::shared_ptr<RankSync> sync) = 0;
};

}  // namespace dpipe

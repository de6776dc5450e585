#pragma once
/// \file
/// Capability interfaces: what graph functions and reading services may ask of a node besides the
/// DataPipe interface. A node opts in by also deriving from the interface; graph functions find
/// such nodes with `graph::find_dps<Interface>(graph)`.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
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

/// What a node that keeps the ranks of a distributed job in step (fullsync) asks of the job:
/// agreements in rounds. Every rank posts each round once and collects it once, in the same
/// order; a rank may post round k + 1 in the call that collects round k, so that it waits only
/// for a rank a whole round behind. The distributed reading service implements it over its store.
/// Thread-safety: one thread at a time per object.
class RankSync {
 public:
  /// Round `number` of the node's epoch `epoch`.
  struct Round {
    std::uint64_t epoch = 0;
    std::uint64_t number = 0;
  };
  /// What a rank tells the others in a round: it can hand out `available` elements in all this
  /// epoch, and `ended`: no more.
  struct Count {
    Round round;
    std::uint64_t available = 0;
    bool ended = false;
  };
  /// The outcome of a round: every rank may hand out up to `bound` elements this epoch (the least
  /// `available` of all ranks), and `ended` tells that the epoch ends there (a rank with that many
  /// has no more).
  struct Agreement {
    std::uint64_t bound = 0;
    bool ended = false;
  };

  virtual ~RankSync() = default;
  /// Posts `post` (unless empty), then collects round `collect` (unless empty), waiting at most
  /// `timeout` for the other ranks' counts of it, and returns its agreement. Throws RendezvousError
  /// naming a rank that failed or is gone, or the ranks that did not arrive in time.
  virtual std::optional<Agreement> exchange(std::optional<Count> post, std::optional<Round> collect,
                                            std::chrono::milliseconds timeout) = 0;
  /// Tells the other ranks, without waiting for them (and for the store a moment at most), that
  /// this rank failed instead of posting `round` (`reason`: what it caught): their collect of that
  /// round throws RendezvousError naming this rank and the reason. Never throws.
  virtual void fail(Round round, const std::string& reason) noexcept = 0;
  /// The most elements a rank reads ahead for one round.
  [[nodiscard]] virtual std::size_t max_block() const noexcept = 0;
  /// Throws RendezvousError naming a rank that is known to be gone (its process died), without
  /// waiting: called for each element handed out, so that a rank hears of it while it hands out
  /// what was agreed before, not only at its next round. Cheap; thread-safe. The default knows of
  /// nothing.
  virtual void check_ranks() const {}
};

/// A node that keeps the ranks of a distributed job in step (fullsync). The distributed reading
/// service hands it the job; without one it passes its elements through.
/// Thread-safety: called while nothing iterates the graph.
class RankSyncDataPipe {
 public:
  virtual ~RankSyncDataPipe() = default;
  /// `sync` is null in a world of one, where the node passes its elements through.
  virtual void join_ranks(std::shared_ptr<RankSync> sync) = 0;
  /// Whether a distributed service joined it.
  [[nodiscard]] virtual bool joined() const noexcept = 0;
};

}  // namespace dpipe

#pragma once
/// \file
/// Capability interfaces: what graph functions and reading services may ask of a node besides the
/// DataPipe interface. A node opts in by also deriving from the interface; graph functions find
/// such nodes with `graph::find_dps<Interface>(graph)`.

#include <cstddef>
#include <cstdint>

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
};

}  // namespace dpipe

#pragma once
/// \file
/// Graph-wide settings (torch's graph_settings and torchdata's graph/settings.py): sharding,
/// random seeds and shuffle switches. Thread-safety: none; apply while nothing iterates the graph.

#include <cstddef>
#include <optional>
#include <vector>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/core/datapipe.hpp>
#include <dpipe/random/seed_generator.hpp>

namespace dpipe::graph {

/// Applies (num_instances, instance_id, group) to every sharding node upstream of `root`. Throws
/// UsageError when two sharding nodes sit on one path ("Sharding twice on a single pipeline ..."),
/// and the node's own errors (instance_id out of range, DEFAULT mixed with other groups).
void apply_sharding(const DataPipePtr& root, std::size_t num_instances, std::size_t instance_id,
                    ShardingPriority group = ShardingPriority::kDefault);

/// Whether some sharding node upstream of `root` was sharded for `group` (a distributed reading
/// service shards for ShardingPriority::kDistributed).
[[nodiscard]] bool sharded_for(const DataPipePtr& root, ShardingPriority group);

/// The length of one iteration of a copy of `root`'s graph with apply_sharding(num_instances,
/// instance_id, group) applied: what that instance yields, when known. `root` is not changed.
[[nodiscard]] std::optional<std::size_t> sharded_length(const DataPipePtr& root, std::size_t num_instances,
                                                        std::size_t instance_id,
                                                        ShardingPriority group = ShardingPriority::kDefault);

/// Seeds each random node in `nodes` from the shared stream of `seeds` (`shared`) or from its
/// worker stream, in order.
void set_datapipes_seed(const std::vector<DataPipePtr>& nodes, SeedGenerator& seeds, bool shared);

/// torchdata's set_graph_random_seed: random nodes upstream of a sharding_filter (and the filter's
/// own upstream) draw from the shared stream, in breadth-first order per filter; the others draw
/// from the worker stream, in breadth-first order from the root.
void set_graph_random_seed(const DataPipePtr& root, SeedGenerator& seeds);

/// Calls set_shuffle(enabled) on every shuffling node; returns how many there are. Does nothing
/// (and returns 0) for std::nullopt.
std::size_t apply_shuffle_settings(const DataPipePtr& root, std::optional<bool> enabled);

}  // namespace dpipe::graph

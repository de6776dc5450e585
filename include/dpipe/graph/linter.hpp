#pragma once
/// \file
/// The linter (torchdata's dataloader2/linter.py): checks a graph for sharding mistakes.

#include <string>
#include <vector>

#include <dpipe/graph/graph.hpp>

namespace dpipe::graph {

/// torchdata's _check_shuffle_before_sharding: every path from the output to its first sharding
/// node must have a shuffling node upstream of that sharding node, on all of its input branches.
/// Paths without a sharding node pass. (dpipe counts any ShufflingDataPipe and any
/// ShardingDataPipe; torchdata only its Shuffler and ShardingFilter classes.)
[[nodiscard]] bool check_shuffle_before_sharding(const DataPipePtr& root);

/// The labels of the random nodes (a shuffle buffer, ...) downstream of a global order's end: each
/// rank runs its own, so what they yield depends on the world size (docs/determinism.md).
[[nodiscard]] std::vector<std::string> random_nodes_after_global_order(const DataPipePtr& root);

/// Whether the graph has a sharding node at all (sharding_filter, sharding_round_robin_dispatch, ...).
[[nodiscard]] bool has_sharding(const DataPipePtr& root);

}  // namespace dpipe::graph

#pragma once
/// \file
/// The graph analyses MultiProcessingReadingService uses to split a pipeline (torchdata's
/// utils/dispatch.py and graph/utils.py), with torchdata's results on its own test fixture.

#include <vector>

#include <dpipe/graph/graph.hpp>

namespace dpipe::graph {

/// The lowest common ancestor of every sharding_round_robin_dispatch node (the dispatch nodes and
/// everything upstream of them run once, in the dispatching process), or nullptr when there is
/// none.
[[nodiscard]] DataPipePtr find_lca_round_robin_sharding_dp(const DataPipeGraph& graph);

/// The largest branches that contain no placeholder (what ops::Placeholder makes): the root when
/// there is none, else the placeholder-free inputs of the nodes that contain one.
[[nodiscard]] std::vector<DataPipePtr> find_non_dispatching_branches(const DataPipeGraph& graph);

/// The frontmost branches whose nodes are all replicable: the root when every node is, else the
/// replicable inputs of non-replicable nodes, skipping a candidate when it or an upstream node is
/// already in the result (torchdata's order-dependent rule).
[[nodiscard]] std::vector<DataPipePtr> find_replicable_branches(const DataPipeGraph& graph);

}  // namespace dpipe::graph

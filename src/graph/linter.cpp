// The linter: sharding checks.

#include <algorithm>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/graph/linter.hpp>

#include "graph_internal.hpp"

namespace dpipe::graph {

using detail::is_a;

namespace {

bool has_shuffler(const DataPipeGraph& graph) {
  if (graph.empty()) return false;
  return std::ranges::all_of(graph.entries, [](const GraphEntry& entry) {
    return is_a<ShufflingDataPipe>(entry.node) || has_shuffler(entry.inputs);
  });
}

bool shuffler_before_sharding(const DataPipeGraph& graph) {
  return std::ranges::all_of(graph.entries, [](const GraphEntry& entry) {
    return is_a<ShardingDataPipe>(entry.node) ? has_shuffler(entry.inputs) : shuffler_before_sharding(entry.inputs);
  });
}

}  // namespace

bool check_shuffle_before_sharding(const DataPipePtr& root) { return shuffler_before_sharding(traverse_dps(root)); }

bool has_sharding(const DataPipePtr& root) {
  const auto nodes = list_dps(traverse_dps(root));
  return std::ranges::any_of(nodes, [](const DataPipePtr& node) {
    return is_a<ShardingDataPipe>(node) || is_a<dpipe::detail::RoundRobinDispatchTag>(node);
  });
}

}  // namespace dpipe::graph

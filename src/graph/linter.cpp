// The linter: sharding checks.

#include <algorithm>
#include <string>
#include <vector>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/global/global_epoch.hpp>
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
    // A global order's nodes shard by global position, after their own permutation.
    if (is_a<GlobalOrderNode>(entry.node)) return true;
    return is_a<ShardingDataPipe>(entry.node) ? has_shuffler(entry.inputs) : shuffler_before_sharding(entry.inputs);
  });
}

bool has_global_end(const DataPipeGraph& graph) {
  return std::ranges::any_of(graph.entries, [](const GraphEntry& entry) {
    return is_a<GlobalOrderEnd>(entry.node) || has_global_end(entry.inputs);
  });
}

void random_after_global_end(const DataPipeGraph& graph, std::vector<std::string>& found) {
  for (const auto& entry : graph.entries) {
    if (is_a<RandomDataPipe>(entry.node) && has_global_end(entry.inputs)) found.push_back(entry.node->label());
    random_after_global_end(entry.inputs, found);
  }
}

}  // namespace

std::vector<std::string> random_nodes_after_global_order(const DataPipePtr& root) {
  std::vector<std::string> found;
  random_after_global_end(traverse_dps(root), found);
  return found;
}

bool check_shuffle_before_sharding(const DataPipePtr& root) { return shuffler_before_sharding(traverse_dps(root)); }

bool has_sharding(const DataPipePtr& root) {
  const auto nodes = list_dps(traverse_dps(root));
  return std::ranges::any_of(nodes, [](const DataPipePtr& node) {
    return is_a<ShardingDataPipe>(node) || is_a<dpipe::detail::RoundRobinDispatchTag>(node);
  });
}

}  // namespace dpipe::graph

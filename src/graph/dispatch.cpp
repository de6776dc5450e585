// The graph analyses that split a pipeline across processes (torchdata's dispatch utilities).

#include <algorithm>
#include <functional>
#include <unordered_map>

#include <dpipe/graph/dispatch.hpp>

#include "graph_internal.hpp"

namespace dpipe::graph {

using detail::IdSet;
using detail::is_a;
using detail::require_single_root;

DataPipePtr find_lca_round_robin_sharding_dp(const DataPipeGraph& graph) {
  require_single_root(graph);
  IdSet dispatched;  // dispatch nodes and everything upstream of them
  for (const auto& node : list_dps(graph)) {
    if (dispatched.contains(node->id()) || !is_a<dpipe::detail::RoundRobinDispatchTag>(node)) continue;
    for (const auto& upstream : list_dps(traverse_dps(node))) dispatched.insert(upstream->id());
  }
  std::unordered_map<std::uint64_t, DataPipePtr> lca;
  const std::function<DataPipePtr(const GraphEntry&)> find_lca = [&](const GraphEntry& entry) -> DataPipePtr {
    if (auto it = lca.find(entry.id); it != lca.end()) return it->second;
    if (dispatched.contains(entry.id)) return lca[entry.id] = entry.node;
    lca[entry.id] = nullptr;
    std::vector<DataPipePtr> found;
    for (const auto& input : entry.inputs.entries) {
      if (auto result = find_lca(input)) found.push_back(std::move(result));
    }
    if (found.empty()) return nullptr;
    const bool unique = std::ranges::all_of(found, [&](const DataPipePtr& node) { return node == found.front(); });
    return lca[entry.id] = unique ? found.front() : entry.node;
  };
  return find_lca(graph.entries.front());
}

std::vector<DataPipePtr> find_non_dispatching_branches(const DataPipeGraph& graph) {
  require_single_root(graph);
  std::vector<DataPipePtr> branches;
  std::unordered_map<std::uint64_t, bool> free_of_placeholder;
  const std::function<bool(const GraphEntry&)> check = [&](const GraphEntry& entry) -> bool {
    if (auto it = free_of_placeholder.find(entry.id); it != free_of_placeholder.end()) return it->second;
    if (is_a<dpipe::detail::PlaceholderTag>(entry.node)) return free_of_placeholder[entry.id] = false;
    free_of_placeholder[entry.id] = true;
    bool result = true;
    for (const auto& input : entry.inputs.entries) {
      if (!check(input)) result = false;
    }
    free_of_placeholder[entry.id] = result;
    if (!result) {
      for (const auto& input : entry.inputs.entries) {
        if (free_of_placeholder[input.id]) branches.push_back(input.node);
      }
    }
    return result;
  };
  if (check(graph.entries.front())) branches.push_back(graph.root());
  return branches;
}

std::vector<DataPipePtr> find_replicable_branches(const DataPipeGraph& graph) {
  require_single_root(graph);
  std::vector<DataPipePtr> branches;
  IdSet chosen;
  std::unordered_map<std::uint64_t, bool> replicable;
  const auto choose_if_frontmost = [&](const DataPipePtr& node) {
    if (chosen.contains(node->id())) return;
    const auto upstream = list_dps(traverse_dps(node));
    if (std::ranges::none_of(upstream, [&](const DataPipePtr& p) { return chosen.contains(p->id()); })) {
      branches.push_back(node);
      chosen.insert(node->id());
    }
  };
  const std::function<bool(const GraphEntry&)> check = [&](const GraphEntry& entry) -> bool {
    if (auto it = replicable.find(entry.id); it != replicable.end()) return it->second;
    replicable[entry.id] = true;
    bool result = entry.node->is_replicable();
    for (const auto& input : entry.inputs.entries) {
      if (!check(input)) result = false;
    }
    replicable[entry.id] = result;
    if (!result) {
      for (const auto& input : entry.inputs.entries) {
        if (replicable[input.id]) choose_if_frontmost(input.node);
      }
    }
    return result;
  };
  if (check(graph.entries.front())) choose_if_frontmost(graph.root());
  return branches;
}

}  // namespace dpipe::graph

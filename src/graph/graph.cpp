// Graph functions: traversal, listing, finding, editing and cloning.

#include <algorithm>
#include <deque>
#include <functional>
#include <unordered_map>

#include <dpipe/core/error.hpp>
#include <dpipe/graph/graph.hpp>

#include "graph_internal.hpp"

namespace dpipe::graph {
namespace {

using detail::IdSet;
using detail::require_single_root;

GraphEntry traverse_node(const DataPipePtr& node, IdSet path) {
  path.insert(node->id());
  GraphEntry entry{node->id(), node, {}};
  for (const auto& input : node->inputs()) {
    if (path.contains(input->id()) || entry.inputs.find(input->id()) != nullptr) continue;
    entry.inputs.entries.push_back(traverse_node(input, path));
  }
  return entry;
}

/// Calls replace_input(old, replacement) on every consumer of `old` in `graph`.
void rewire_consumers(const DataPipeGraph& graph, const DataPipePtr& old, const DataPipePtr& replacement,
                      IdSet& visited) {
  for (const auto& entry : graph.entries) {
    if (entry.id == old->id() || !visited.insert(entry.id).second) continue;
    if (entry.inputs.find(old->id()) != nullptr) entry.node->replace_input(*old, replacement);
    rewire_consumers(entry.inputs, old, replacement, visited);
  }
}

DataPipePtr clone_node(const DataPipePtr& node, std::unordered_map<const DataPipe*, DataPipePtr>& copies) {
  if (auto it = copies.find(node.get()); it != copies.end()) return it->second;
  DataPipePtr copy = node->clone_self();
  copies.emplace(node.get(), copy);
  copy->for_each_input([&](InputSlot& input) {
    const DataPipePtr cloned = clone_node(input.target(), copies);
    if (!input.try_assign(cloned)) {
      DPIPE_THROW(InvalidArgument, "clone: {} cannot read the copy {} of its input", copy->label(), cloned->label());
    }
  });
  return copy;
}

}  // namespace

// --- DataPipeGraph ---------------------------------------------------------------------------------

const GraphEntry* DataPipeGraph::find(std::uint64_t id) const noexcept {
  const auto it = std::ranges::find(entries, id, &GraphEntry::id);
  return it == entries.end() ? nullptr : &*it;
}

const DataPipePtr& DataPipeGraph::root() const {
  require_single_root(*this);
  return entries.front().node;
}

// --- traversal -------------------------------------------------------------------------------------

DataPipeGraph traverse_dps(const DataPipePtr& root) {
  if (!root) DPIPE_THROW(InvalidArgument, "traverse_dps: the root is null");
  DataPipeGraph graph;
  graph.entries.push_back(traverse_node(root, {}));
  return graph;
}

std::vector<DataPipePtr> list_dps(const DataPipeGraph& graph, const std::vector<DataPipePtr>& exclude) {
  IdSet seen;
  for (const auto& excluded : exclude) {
    if (seen.contains(excluded->id())) continue;
    for (const auto& node : list_dps(traverse_dps(excluded))) seen.insert(node->id());
  }
  std::vector<DataPipePtr> nodes;
  std::deque<const GraphEntry*> queue;
  for (const auto& entry : graph.entries) {
    if (seen.insert(entry.id).second) queue.push_back(&entry);
  }
  while (!queue.empty()) {
    const GraphEntry* entry = queue.front();
    queue.pop_front();
    nodes.push_back(entry->node);
    for (const auto& input : entry->inputs.entries) {
      if (seen.insert(input.id).second) queue.push_back(&input);
    }
  }
  return nodes;
}

namespace detail {

void require_single_root(const DataPipeGraph& graph) {
  if (graph.size() != 1) {
    DPIPE_THROW(InvalidArgument, "a DataPipeGraph must hold exactly one output node, this one holds {}", graph.size());
  }
}

std::vector<DataPipePtr> preorder(const DataPipeGraph& graph) {
  std::vector<DataPipePtr> nodes;
  IdSet seen;
  const std::function<void(const DataPipeGraph&)> visit = [&](const DataPipeGraph& g) {
    for (const auto& entry : g.entries) {
      if (!seen.insert(entry.id).second) continue;
      nodes.push_back(entry.node);
      visit(entry.inputs);
    }
  };
  visit(graph);
  return nodes;
}

void throw_not_iter(const DataPipePtr& node, std::string_view expected) {
  if (!node) DPIPE_THROW(InvalidArgument, "expected an iter pipe of {}, got a null node", expected);
  DPIPE_THROW(InvalidArgument, "expected an iter pipe of {}, but {} produces {}", expected, node->label(),
              node->element_type());
}

}  // namespace detail

std::vector<DataPipePtr> find_dps(const DataPipeGraph& graph, std::string_view name) {
  std::vector<DataPipePtr> found;
  for (const auto& node : detail::preorder(graph)) {
    if (node->name() == name) found.push_back(node);
  }
  return found;
}

// --- editing ---------------------------------------------------------------------------------------

DataPipeGraph replace_dp(const DataPipeGraph& graph, const DataPipePtr& old, const DataPipePtr& replacement) {
  require_single_root(graph);
  if (!old || !replacement) DPIPE_THROW(InvalidArgument, "replace_dp: a node is null");
  // Replacing the root: the replacement's graph is the new graph. torchdata would also rewrite a
  // replacement that wraps the root into a self-loop; dpipe leaves the replacement untouched.
  if (graph.root() == old) return traverse_dps(replacement);
  IdSet visited;
  rewire_consumers(graph, old, replacement, visited);
  return traverse_dps(graph.root());
}

DataPipeGraph remove_dp(const DataPipeGraph& graph, const DataPipePtr& node) {
  require_single_root(graph);
  if (!node) DPIPE_THROW(InvalidArgument, "remove_dp: the node is null");
  const DataPipeGraph own = traverse_dps(node);
  const auto& inputs = own.entries.front().inputs;
  if (inputs.empty()) DPIPE_THROW(UsageError, "Cannot remove the source DataPipe from the graph of DataPipe");
  if (inputs.size() > 1) {
    DPIPE_THROW(UsageError, "Cannot remove the receiving DataPipe having multiple sending DataPipes");
  }
  const DataPipePtr upstream = inputs.entries.front().node;
  if (graph.root() == node) return traverse_dps(upstream);
  IdSet visited;
  rewire_consumers(graph, node, upstream, visited);
  return traverse_dps(graph.root());
}

DataPipePtr clone(const DataPipePtr& root) {
  if (!root) DPIPE_THROW(InvalidArgument, "clone: the root is null");
  std::unordered_map<const DataPipe*, DataPipePtr> copies;
  return clone_node(root, copies);
}

}  // namespace dpipe::graph

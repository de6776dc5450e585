// Graph functions: traversal, listing, editing, cloning, analyses, settings and pictures.

#include <algorithm>
#include <deque>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include <dpipe/core/error.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/graph/dispatch.hpp>
#include <dpipe/graph/dot.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/linter.hpp>
#include <dpipe/graph/settings.hpp>
#include <dpipe/graph/statistics.hpp>

namespace dpipe::graph {
namespace {

using IdSet = std::unordered_set<std::uint64_t>;

GraphEntry traverse_node(const DataPipePtr& node, IdSet path) {
  path.insert(node->id());
  GraphEntry entry{node->id(), node, {}};
  for (const auto& input : node->inputs()) {
    if (path.contains(input->id()) || entry.inputs.find(input->id()) != nullptr) continue;
    entry.inputs.entries.push_back(traverse_node(input, path));
  }
  return entry;
}

void require_single_root(const DataPipeGraph& graph) {
  if (graph.size() != 1) {
    DPIPE_THROW(InvalidArgument, "a DataPipeGraph must hold exactly one output node, this one holds {}", graph.size());
  }
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

template <class Tag>
bool is_a(const DataPipePtr& node) {
  return dynamic_cast<const Tag*>(node.get()) != nullptr;
}

std::string escape(std::string_view text) {
  std::string escaped;
  for (const char c : text) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return escaped;
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

// --- analyses (MultiProcessingReadingService) ------------------------------------------------------

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

// --- settings -------------------------------------------------------------------------------------

void apply_sharding(const DataPipePtr& root, std::size_t num_instances, std::size_t instance_id,
                    ShardingPriority group) {
  const std::function<void(const DataPipeGraph&, const DataPipePtr&)> apply =
      [&](const DataPipeGraph& graph, const DataPipePtr& applied_downstream) {
        for (const auto& entry : graph.entries) {
          DataPipePtr applied = applied_downstream;
          if (auto* sharding = dynamic_cast<ShardingDataPipe*>(entry.node.get())) {
            if (applied_downstream) {
              DPIPE_THROW(UsageError,
                          "Sharding twice on a single pipeline is likely unintended and will cause "
                          "data loss. Sharding already applied to {} while trying to apply to {}",
                          applied_downstream->label(), entry.node->label());
            }
            sharding->apply_sharding(num_instances, instance_id, group);
            applied = entry.node;
          }
          apply(entry.inputs, applied);
        }
      };
  apply(traverse_dps(root), nullptr);
}

void set_datapipes_seed(const std::vector<DataPipePtr>& nodes, SeedGenerator& seeds, bool shared) {
  for (const auto& node : nodes) {
    if (auto* random = dynamic_cast<RandomDataPipe*>(node.get())) {
      random->set_seed(shared ? seeds.generate_shared_seed() : seeds.generate_seed());
    }
  }
}

void set_graph_random_seed(const DataPipePtr& root, SeedGenerator& seeds) {
  const DataPipeGraph graph = traverse_dps(root);
  std::vector<DataPipePtr> sharding_nodes;
  for (const auto& node : detail::preorder(graph)) {
    if (is_a<ShardingDataPipe>(node)) sharding_nodes.push_back(node);
  }
  std::vector<DataPipePtr> before;
  IdSet seen;
  for (const auto& sharding : sharding_nodes) {
    for (const auto& node : list_dps(traverse_dps(sharding))) {
      if (seen.insert(node->id()).second) before.push_back(node);
    }
  }
  set_datapipes_seed(before, seeds, /*shared=*/true);
  set_datapipes_seed(list_dps(graph, sharding_nodes), seeds, /*shared=*/false);
}

std::size_t apply_shuffle_settings(const DataPipePtr& root, std::optional<bool> enabled) {
  if (!enabled) return 0;
  std::size_t count = 0;
  for (const auto& node : list_dps(traverse_dps(root))) {
    if (auto* shuffling = dynamic_cast<ShufflingDataPipe*>(node.get())) {
      shuffling->set_shuffle(*enabled);
      ++count;
    }
  }
  return count;
}

// --- linter ---------------------------------------------------------------------------------------

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

// --- statistics -----------------------------------------------------------------------------------

void enable_statistics(const DataPipePtr& root, bool enabled) {
  for (const auto& node : list_dps(traverse_dps(root))) {
    if (auto* iter = dynamic_cast<IterDataPipeBase*>(node.get())) iter->set_counting(enabled);
  }
}

std::vector<NodeStatistics> statistics(const DataPipePtr& root) {
  std::vector<NodeStatistics> rows;
  for (const auto& node : list_dps(traverse_dps(root))) {
    const auto* iter = dynamic_cast<const IterDataPipeBase*>(node.get());
    if (iter == nullptr || iter->counters() == nullptr) continue;
    const auto& counters = *iter->counters();
    NodeStatistics row{node->id(),
                       node->label(),
                       counters.calls,
                       counters.elements,
                       std::chrono::nanoseconds(counters.nanoseconds),
                       std::chrono::nanoseconds(counters.nanoseconds)};
    IdSet seen;
    for (const auto& input : node->inputs()) {
      const auto* upstream = dynamic_cast<const IterDataPipeBase*>(input.get());
      if (upstream == nullptr || upstream->counters() == nullptr || !seen.insert(input->id()).second) continue;
      row.exclusive -= std::chrono::nanoseconds(upstream->counters()->nanoseconds);
    }
    row.exclusive = std::max(row.exclusive, std::chrono::nanoseconds(0));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string format_statistics(const std::vector<NodeStatistics>& rows) {
  std::string table =
      fmt::format("{:<32} {:>12} {:>10} {:>14} {:>14}\n", "node", "elements", "calls", "total ms", "own ms");
  for (const auto& row : rows) {
    table +=
        fmt::format("{:<32} {:>12} {:>10} {:>14.3f} {:>14.3f}\n", row.label, row.elements, row.calls,
                    static_cast<double>(row.inclusive.count()) / 1e6, static_cast<double>(row.exclusive.count()) / 1e6);
  }
  return table;
}

// --- pictures -------------------------------------------------------------------------------------

std::string to_dot(const DataPipeGraph& graph, const DotOptions& options) {
  const auto nodes = list_dps(graph);
  std::string dot =
      fmt::format("digraph \"{}\" {{\n  rankdir=LR;\n  node [shape=box, style=rounded];\n", escape(options.title));
  for (const auto& node : nodes) {
    dot += fmt::format("  n{} [label=\"{}\\n{}\"];\n", node->id(), escape(node->label()), escape(node->element_type()));
  }
  for (std::size_t i = 0; i < options.clusters.size(); ++i) {
    const auto& cluster = options.clusters[i];
    dot += fmt::format("  subgraph cluster_{} {{\n    label=\"{}\";\n    style=dashed;\n", i, escape(cluster.label));
    for (const auto id : cluster.node_ids) dot += fmt::format("    n{};\n", id);
    dot += "  }\n";
  }
  for (const auto& node : nodes) {
    IdSet drawn;
    for (const auto& input : node->inputs()) {
      if (drawn.insert(input->id()).second) dot += fmt::format("  n{} -> n{};\n", input->id(), node->id());
    }
  }
  for (const auto& link : options.links) {
    dot += fmt::format("  n{} -> n{} [style=dashed, label=\"{}\"];\n", link.from, link.to, escape(link.label));
  }
  dot += "}\n";
  return dot;
}

}  // namespace dpipe::graph

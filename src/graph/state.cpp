// Whole-graph checkpoints: node paths, save_state, load_state.

#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include <dpipe/core/checkpoint_schema.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/graph/background.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/state.hpp>

namespace dpipe::graph {
namespace {

/// The checkpoint paths of the stateful nodes; throws StateError if two would collide.
std::vector<NodePath> stateful_paths(const DataPipePtr& root) {
  std::vector<NodePath> result;
  std::unordered_set<std::string> seen;
  for (auto& entry : node_paths(root)) {
    if (entry.node->stateless()) continue;
    if (!seen.insert(entry.stateful_path).second) {
      DPIPE_THROW(StateError, "two nodes of the graph have the checkpoint path {}", entry.path);
    }
    result.push_back(std::move(entry));
  }
  return result;
}

/// The scope of one node's fields.
std::string node_scope(const std::string& scope, const std::string& path) {
  return scope.empty() ? path : scope + "/" + path;
}

}  // namespace

std::vector<NodePath> node_paths(const DataPipePtr& root) {
  std::vector<NodePath> paths;
  std::unordered_set<std::uint64_t> visited{root->id()};
  std::deque<NodePath> queue;
  // `base` + `branch` + "/" + the node's name, or `base` + `branch` when the node is not `named`.
  const auto extend = [](const std::string& base, const std::string& branch, const DataPipePtr& node, bool named) {
    if (!named) return base + branch;
    return base.empty() && branch.empty() ? std::string(node->name())
                                          : fmt::format("{}{}/{}", base, branch, node->name());
  };
  const auto configured = [](const DataPipePtr& node) { return !node->settings().empty(); };
  const auto has_settings = [&](const DataPipePtr& node) { return !node->stateless() || configured(node); };
  queue.push_back(NodePath{root, std::string(root->name()), extend({}, {}, root, !root->stateless()),
                           extend({}, {}, root, has_settings(root)), extend({}, {}, root, configured(root))});
  while (!queue.empty()) {
    NodePath current = std::move(queue.front());
    queue.pop_front();
    const auto inputs = current.node->inputs();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto& input = inputs[i];
      if (!visited.insert(input->id()).second) continue;
      const std::string branch = inputs.size() > 1 ? fmt::format("[{}]", i) : std::string();
      queue.push_back(NodePath{input, extend(current.path, branch, input, true),
                               extend(current.stateful_path, branch, input, !input->stateless()),
                               extend(current.settings_path, branch, input, has_settings(input)),
                               extend(current.configured_path, branch, input, configured(input))});
    }
    paths.push_back(std::move(current));
  }
  return paths;
}

void save_state(const DataPipePtr& root, const StateWriter& writer) {
  const auto nodes = stateful_paths(root);
  const BackgroundStop stopped(root);
  for (const auto& entry : nodes) {
    StateWriter node_writer = writer.scope(entry.path);
    node_writer.record(NodeRecord{entry.node->element_type(), entry.stateful_path});
    if (!entry.node->save_state(node_writer)) {
      DPIPE_THROW(StateNotSupportedError,
                  "{} ({}) does not support checkpoints: override save_state and load_state to checkpoint this "
                  "pipeline (or stateless() if it keeps no iteration state)",
                  entry.node->label(), entry.node->element_type());
    }
  }
}

void load_state(const DataPipePtr& root, const StateReader& reader) {
  // The saved nodes: the records under the reader's scope (keys without a field name).
  const std::string prefix = reader.name().empty() ? std::string() : reader.name() + "/";
  std::unordered_map<std::string, std::pair<std::string, NodeRecord>> saved;  // stateful path -> (path, record)
  for (const auto& field : reader.store().fields()) {
    if (!field.key.starts_with(prefix) || field.key.find(':') != std::string::npos) continue;
    NodeRecord record;
    try {
      record = from_bytes<NodeRecord>(field.value);
    } catch (const SerializationError& error) {
      DPIPE_THROW(StateError, "the checkpoint's record {} is corrupt: {}", field.key, error.what());
    }
    reader.store().mark_read(field);
    auto path = field.key.substr(prefix.size());
    auto stateful_path = record.stateful_path;
    if (!saved.emplace(std::move(stateful_path), std::pair{std::move(path), std::move(record)}).second) {
      DPIPE_THROW(StateError, "the checkpoint holds two records for {}", field.key);
    }
  }
  const auto nodes = stateful_paths(root);
  BackgroundStop(root).keep_stopped();
  for (const auto& entry : nodes) {
    const auto it = saved.find(entry.stateful_path);
    if (it == saved.end()) {
      DPIPE_THROW(StateError,
                  "{}: the checkpoint holds no state for this node ({}): a stateful node was added, removed or moved "
                  "since the checkpoint was saved; restore it into a pipeline built by the same code",
                  node_scope(reader.name(), entry.path), entry.node->label());
    }
    const auto& [saved_path, record] = it->second;
    // An older dpipe may have saved a type's long spelling: compare the names users write.
    if (const std::string saved_type = dpipe::detail::tidy_type_name(record.element_type);
        saved_type != entry.node->element_type()) {
      DPIPE_THROW(StateError, "{}: the checkpoint was saved from a node of element type {}, this node ({}) yields {}",
                  node_scope(reader.name(), entry.path), saved_type, entry.node->label(), entry.node->element_type());
    }
    const StateReader node_reader = reader.scope(saved_path);
    entry.node->load_state(node_reader);
    const auto unread = reader.store().unread(node_reader.name() + ":");
    if (!unread.empty()) {
      DPIPE_THROW(StateError, "{}: the checkpoint's field {} was not read by {} (saved by another kind of node?)",
                  node_reader.name(), unread.front(), entry.node->label());
    }
    saved.erase(it);
  }
  if (!saved.empty()) {
    DPIPE_THROW(StateError,
                "{}: the checkpoint holds state for this node, which the pipeline no longer has (a stateful node was "
                "removed or moved since the checkpoint was saved)",
                node_scope(reader.name(), saved.begin()->second.first));
  }
  if (const auto unread = reader.store().unread(prefix); !unread.empty()) {
    DPIPE_THROW(StateError, "the checkpoint's field {} belongs to no node of the graph", unread.front());
  }
  for (const auto& entry : node_paths(root)) {
    entry.node->for_each_input([](InputSlot& input) { input.rebind(); });
  }
  if (auto* iter_root = dynamic_cast<IterDataPipeBase*>(root.get())) iter_root->continue_on_next_reset();
}

std::vector<std::byte> save_state(const DataPipePtr& root) {
  StateStore store;
  save_state(root, StateWriter(store, std::string(checkpoint_schema::kGraph)));
  return store.to_blob();
}

void load_state(const DataPipePtr& root, std::span<const std::byte> blob) {
  const StateStore store = StateStore::from_blob(blob);
  load_state(root, StateReader(store, std::string(checkpoint_schema::kGraph)));
  if (const auto unread = store.unread(""); !unread.empty()) {
    DPIPE_THROW(StateError, "the checkpoint's field {} belongs to no node of the graph", unread.front());
  }
}

}  // namespace dpipe::graph

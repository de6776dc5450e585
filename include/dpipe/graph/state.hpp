#pragma once
/// \file
/// Checkpoints of a whole graph. Every node that keeps iteration state saves it as fields under its
/// path from the root (tf.data's prefix:key scheme): "shuffle/from:position" is field `position`
/// of the `from` node read by a `shuffle`. Stateless nodes (map, batch, ...) save nothing and do not
/// count in paths, so a checkpoint restores into a graph that gained or lost one; a stateful node
/// added, removed, moved or of another element type is a StateError naming its path. Restoring
/// into a graph built by the same code continues the saved iteration exactly, without replaying it.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe {
class StateWriter;
class StateReader;
}  // namespace dpipe

namespace dpipe::graph {

/// A node and its checkpoint path.
struct NodePath {
  DataPipePtr node;
  /// Every node's name from the root to the node, "batch/map/shuffle/from"; a node with several
  /// inputs names the one taken, "zip[1]/from".
  std::string path;
  /// The same without the stateless nodes, "shuffle/from": what a checkpoint is matched by.
  std::string stateful_path;
  /// The same with only the nodes that are stateful or have settings (DataPipe::settings()),
  /// "batch/shuffle/from": what DataLoader2 compares settings by, so that a stateless map added
  /// for augmentation changes nothing, and a batch_size does.
  std::string settings_path;
  /// The same with only the nodes that have settings, "batch/shuffle/from": what DataLoader2
  /// compares a checkpoint that replays its epoch by, since it restores no node state.
  std::string configured_path;
};

/// A stateful node's record in a checkpoint, under the key "<scope>/<path>": what the node yields,
/// and the path it is matched by when the checkpoint is restored.
struct NodeRecord {
  std::string element_type;
  std::string stateful_path;
  DPIPE_FIELDS(element_type, stateful_path)
};

/// The path of every node upstream of `root` (each once, breadth-first from the root; a node read
/// by several consumers gets the path through the first one).
[[nodiscard]] std::vector<NodePath> node_paths(const DataPipePtr& root);

/// Saves the state of every stateful node upstream of `root` under `writer`'s scope: a record of
/// each (its element type) and its fields. Background threads are stopped while the state is read
/// and restarted afterwards. Throws StateNotSupportedError naming a node that cannot save its
/// state.
void save_state(const DataPipePtr& root, const StateWriter& writer);
/// Restores what save_state wrote under `reader`'s scope; the next iteration of `root` continues
/// where the saved one stopped. Throws StateError naming the path of a node the checkpoint does
/// not match; the graph is then unusable until its next reset.
void load_state(const DataPipePtr& root, const StateReader& reader);

/// A checkpoint blob of the graph alone (scope "graph"), for pipelines run without a loader.
[[nodiscard]] std::vector<std::byte> save_state(const DataPipePtr& root);
/// Restores a blob from save_state(root). Throws StateError for a blob of another graph, a
/// truncated or corrupted blob, or one of an earlier dpipe.
void load_state(const DataPipePtr& root, std::span<const std::byte> blob);

template <class Handle>
requires requires(const Handle& handle) { handle.ptr(); }
[[nodiscard]] std::vector<std::byte> save_state(const Handle& root) { return save_state(DataPipePtr(root.ptr())); }

template <class Handle>
requires requires(const Handle& handle) { handle.ptr(); }
void load_state(const Handle& root, std::span<const std::byte> blob) { load_state(DataPipePtr(root.ptr()), blob); }

}  // namespace dpipe::graph

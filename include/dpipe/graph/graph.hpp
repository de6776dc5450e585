#pragma once
/// \file
/// Graph functions (torchdata's dataloader2.graph): traverse a pipeline, list and find nodes,
/// replace and remove nodes in place, deep-clone. A DataPipeGraph is the tree expansion of the
/// node DAG: a node read by two consumers appears under each of them. Graph edits mutate the
/// nodes' input edges; do them while nothing iterates the graph. Thread-safety: none.

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/map_pipe.hpp>

namespace dpipe::graph {

struct GraphEntry;

/// torchdata's DataPipeGraph: an ordered map from node id to (node, graph of its inputs). The top
/// level of a traversal has exactly one entry, the root; a source maps to an empty graph. Inputs
/// appear in the order of the node's edges, each distinct input once.
struct DataPipeGraph {
  std::vector<GraphEntry> entries;

  [[nodiscard]] bool empty() const noexcept { return entries.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return entries.size(); }
  /// The entry for `id`, or nullptr.
  [[nodiscard]] const GraphEntry* find(std::uint64_t id) const noexcept;
  /// The node of the single top-level entry; throws InvalidArgument unless there is exactly one.
  [[nodiscard]] const DataPipePtr& root() const;
};

struct GraphEntry {
  std::uint64_t id;
  DataPipePtr node;
  DataPipeGraph inputs;
};

/// The graph of `root` and everything upstream of it. A cycle is cut where it closes.
[[nodiscard]] DataPipeGraph traverse_dps(const DataPipePtr& root);

/// Every node of `graph` once, in breadth-first order from the root. Each node in `exclude`, and
/// everything upstream of it, is left out.
[[nodiscard]] std::vector<DataPipePtr> list_dps(const DataPipeGraph& graph,
                                                const std::vector<DataPipePtr>& exclude = {});

/// The nodes named `name` ("map", "shuffle", ...), each once, in depth-first pre-order.
[[nodiscard]] std::vector<DataPipePtr> find_dps(const DataPipeGraph& graph, std::string_view name);

/// The nodes that are a `Node` (dynamic_cast: subclasses and interfaces such as RandomDataPipe
/// match too, unlike torchdata's exact type test), each once, in depth-first pre-order.
template <class Node>
[[nodiscard]] std::vector<std::shared_ptr<Node>> find_dps(const DataPipeGraph& graph);

/// Points every consumer of `old` at `replacement` and returns the new graph. Replacing the root
/// returns the graph of `replacement`; `replacement` may wrap `old`. Throws InvalidArgument, naming
/// both element types, when a consumer cannot read what `replacement` produces.
DataPipeGraph replace_dp(const DataPipeGraph& graph, const DataPipePtr& old, const DataPipePtr& replacement);

/// Points every consumer of `node` at `node`'s single input and returns the new graph (removing
/// the root makes its input the root). Throws UsageError for a source or a node with several
/// inputs.
DataPipeGraph remove_dp(const DataPipeGraph& graph, const DataPipePtr& node);

/// A deep copy of `root`'s graph: every node copied once, so a node shared by two consumers is
/// shared in the copy too. The copy starts a fresh iteration when iterated.
[[nodiscard]] DataPipePtr clone(const DataPipePtr& root);

/// clone() for handles.
template <class T>
[[nodiscard]] IterPipe<T> clone(const IterPipe<T>& root) {
  return IterPipe<T>(std::static_pointer_cast<IterDataPipe<T>>(clone(DataPipePtr(root.ptr()))));
}
template <class K, class V>
[[nodiscard]] MapPipe<K, V> clone(const MapPipe<K, V>& root) {
  return MapPipe<K, V>(std::static_pointer_cast<MapDataPipe<K, V>>(clone(DataPipePtr(root.ptr()))));
}

/// The typed handle of `node`; throws InvalidArgument, naming both types, when it is not an iter
/// pipe of T.
template <class T>
[[nodiscard]] IterPipe<T> as_iter(const DataPipePtr& node);

/// traverse_dps for handles.
template <class T>
[[nodiscard]] DataPipeGraph traverse_dps(const IterPipe<T>& root) {
  return traverse_dps(DataPipePtr(root.ptr()));
}

// --- definitions -------------------------------------------------------------------------------

namespace detail {
/// Depth-first pre-order over distinct nodes.
std::vector<DataPipePtr> preorder(const DataPipeGraph& graph);
[[noreturn]] void throw_not_iter(const DataPipePtr& node, std::string_view expected);
}  // namespace detail

template <class Node>
std::vector<std::shared_ptr<Node>> find_dps(const DataPipeGraph& graph) {
  std::vector<std::shared_ptr<Node>> found;
  for (const auto& node : detail::preorder(graph)) {
    if (auto typed = std::dynamic_pointer_cast<Node>(node)) found.push_back(std::move(typed));
  }
  return found;
}

template <class T>
IterPipe<T> as_iter(const DataPipePtr& node) {
  auto typed = std::dynamic_pointer_cast<IterDataPipe<T>>(node);
  if (!typed) detail::throw_not_iter(node, type_name<T>());
  return IterPipe<T>(std::move(typed));
}

}  // namespace dpipe::graph

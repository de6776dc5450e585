#pragma once
// What the graph functions' source files share. Private to the library.

#include <cstdint>
#include <unordered_set>

#include <dpipe/graph/graph.hpp>

namespace dpipe::graph::detail {

using IdSet = std::unordered_set<std::uint64_t>;

/// Whether `node` is a `Tag` (a node class or a capability interface).
template <class Tag>
bool is_a(const DataPipePtr& node) {
  return dynamic_cast<const Tag*>(node.get()) != nullptr;
}

/// Throws InvalidArgument unless `graph` has exactly one top-level entry.
void require_single_root(const DataPipeGraph& graph);

}  // namespace dpipe::graph::detail

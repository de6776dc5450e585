#pragma once
/// \file
/// Checkpoints of a whole graph: every node saves its own iteration state, in list_dps order, into
/// one blob with a format version, a fingerprint of the graph's structure and a checksum. Restoring
/// into a graph built by the same code continues the saved iteration exactly, without replaying it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <dpipe/core/datapipe.hpp>

namespace dpipe::graph {

/// A hash of the graph's structure: node names, kinds, element types and edges, in list_dps order.
[[nodiscard]] std::uint64_t fingerprint(const DataPipePtr& root);

/// Saves the iteration state of every node upstream of `root`. Background threads (prefetch) are
/// paused while the state is read and resumed afterwards. Throws StateError when a node cannot
/// save its state.
[[nodiscard]] std::vector<std::byte> save_state(const DataPipePtr& root);

/// Restores a blob from save_state into the graph of `root`; the next iteration of `root`
/// continues where the saved one stopped. Throws StateError for a blob from another graph, and for
/// a truncated or corrupted blob; the graph is then unusable until its next reset.
void load_state(const DataPipePtr& root, std::span<const std::byte> blob);

template <class Handle>
requires requires(const Handle& handle) { handle.ptr(); }
[[nodiscard]] std::vector<std::byte> save_state(const Handle& root) { return save_state(DataPipePtr(root.ptr())); }

template <class Handle>
requires requires(const Handle& handle) { handle.ptr(); }
void load_state(const Handle& root, std::span<const std::byte> blob) { load_state(DataPipePtr(root.ptr()), blob); }

}  // namespace dpipe::graph

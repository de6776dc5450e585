#pragma once
/// \file
/// Per-node statistics on request: how many elements each iter node produced, in how many calls,
/// and how long was spent inside it (with and without its inputs). Counting costs two clock reads
/// per call while on, and one branch per call while off (the default).

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <dpipe/core/datapipe.hpp>

namespace dpipe::graph {

struct NodeStatistics {
  std::uint64_t id = 0;
  std::string label;
  std::uint64_t calls = 0;
  std::uint64_t elements = 0;
  /// Time inside the node's next()/pull(), its inputs' included.
  std::chrono::nanoseconds inclusive{0};
  /// `inclusive` minus its inputs' inclusive time: the node's own work. A node with a thread
  /// (prefetch) waits for it rather than working, so its own time is the consumer's wait.
  std::chrono::nanoseconds exclusive{0};
  /// Input elements the node's OnError::skip() policy dropped because its function threw.
  std::uint64_t skipped = 0;
};

/// Switches counting on (from zero) or off for every iter node upstream of `root`.
void enable_statistics(const DataPipePtr& root, bool enabled = true);

/// The counters of every counting node upstream of `root`, in list_dps order.
[[nodiscard]] std::vector<NodeStatistics> statistics(const DataPipePtr& root);

/// A table of `rows`, one line per node.
[[nodiscard]] std::string format_statistics(const std::vector<NodeStatistics>& rows);

}  // namespace dpipe::graph

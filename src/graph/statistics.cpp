// Per-node statistics.

#include <algorithm>

#include <fmt/format.h>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/statistics.hpp>

#include "graph_internal.hpp"

namespace dpipe::graph {

using detail::IdSet;

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
                       std::chrono::nanoseconds(counters.nanoseconds),
                       counters.skipped};
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
  std::string table = fmt::format("{:<32} {:>12} {:>10} {:>14} {:>14} {:>10}\n", "node", "elements", "calls",
                                  "total ms", "own ms", "skipped");
  for (const auto& row : rows) {
    table += fmt::format("{:<32} {:>12} {:>10} {:>14.3f} {:>14.3f} {:>10}\n", row.label, row.elements, row.calls,
                         static_cast<double>(row.inclusive.count()) / 1e6,
                         static_cast<double>(row.exclusive.count()) / 1e6, row.skipped);
  }
  return table;
}

}  // namespace dpipe::graph

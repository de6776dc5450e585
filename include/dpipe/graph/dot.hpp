#pragma once
/// \file
/// to_dot: a Graphviz picture of a pipeline. Each node shows its label and element type; edges run
/// from input to consumer. Clusters draw boxes around groups of nodes (reading services use them
/// for worker and dispatching processes).

#include <cstdint>
#include <string>
#include <vector>

#include <dpipe/graph/graph.hpp>

namespace dpipe::graph {

/// A labelled box around some nodes.
struct DotCluster {
  std::string label;
  std::vector<std::uint64_t> node_ids;
};

/// A dashed edge between two nodes that the graph does not connect (elements crossing from one
/// process to another).
struct DotLink {
  std::uint64_t from = 0;
  std::uint64_t to = 0;
  std::string label;
};

struct DotOptions {
  std::string title = "dpipe";
  std::vector<DotCluster> clusters{};
  std::vector<DotLink> links{};
};

/// The Graphviz `digraph` text of `graph` (which may hold several top-level entries).
[[nodiscard]] std::string to_dot(const DataPipeGraph& graph, const DotOptions& options = {});

}  // namespace dpipe::graph

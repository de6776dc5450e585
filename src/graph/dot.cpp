// to_dot: Graphviz pictures of a pipeline.

#include <string_view>

#include <fmt/format.h>

#include <dpipe/graph/dot.hpp>

#include "graph_internal.hpp"

namespace dpipe::graph {

using detail::IdSet;

namespace {

std::string escape(std::string_view text) {
  std::string escaped;
  for (const char c : text) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

}  // namespace

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

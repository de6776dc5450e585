// Graph functions: list the nodes of a pipeline, find some, wrap one in place, draw the result.

#include <cstdio>
#include <string>
#include <vector>

#include <dpipe/dpipe.hpp>

int main() {
  // [build]
  auto source = dpipe::iter::from(std::vector<int>{1, 2, 3, 4, 5, 6});
  auto pipe = source.map([](int x) { return x * 10; }).filter([](int x) { return x != 30; }).batch(2);
  // [build]

  // [inspect]
  auto graph = dpipe::graph::traverse_dps(pipe);
  for (const auto& node : dpipe::graph::list_dps(graph)) {  // breadth-first from the output
    std::printf("%s yields %s\n", std::string(node->name()).c_str(), node->element_type().c_str());
  }
  const auto maps = dpipe::graph::find_dps(graph, "map");
  std::printf("map nodes: %zu\n", maps.size());
  // [inspect]

  // [replace]
  // Wrap the source in header(4): every consumer of `source` now reads through the header.
  auto limited = source.header(4);
  graph = dpipe::graph::replace_dp(graph, source.ptr(), limited.ptr());
  // [replace]
  for (const auto& batch : pipe) {
    std::printf("batch:");
    for (int x : batch) std::printf(" %d", x);
    std::printf("\n");
  }

  // [dot]
  const std::string picture = dpipe::graph::to_dot(graph);  // render with: dot -Tsvg
  // [dot]
  std::printf("%s", picture.c_str());
}

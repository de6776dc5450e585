// A custom ReadingService that rewrites the graph with the graph functions: every map node tagged
// "expensive" becomes a threadpool_map with the same function, so the expensive work runs on a
// thread pool while the pipeline code stays the same.

#include <cstdio>
#include <vector>

#include <dpipe/dpipe.hpp>

// [service]
class ParallelizeExpensiveMaps final : public dpipe::ReadingService<ParallelizeExpensiveMaps> {
 public:
  explicit ParallelizeExpensiveMaps(std::size_t threads) : threads_(threads) {}

  dpipe::DataPipePtr initialize(dpipe::DataPipePtr graph) override {
    auto traversal = dpipe::graph::traverse_dps(graph);
    for (const auto& node : dpipe::graph::find_dps(traversal, "map")) {
      if (node->tag() != "expensive") continue;
      // The map node's static type is not known here: a typed operation makes the replacement.
      auto parallel = dpipe::apply_typed_op<dpipe::ops::ToThreadPoolMap>(node, threads_, 4 * threads_);
      traversal = dpipe::graph::replace_dp(traversal, node, parallel);
      ++replaced_;
    }
    std::printf("replaced %zu map node(s) with threadpool_map\n", replaced_);
    return traversal.root();
  }

 private:
  std::size_t threads_;
  std::size_t replaced_ = 0;
};
// [service]

int main() {
  // [use]
  std::vector<int> ids(64);
  for (int i = 0; i < 64; ++i) ids[static_cast<std::size_t>(i)] = i;
  auto pipeline = dpipe::iter::from(ids)
                      .map([](int id) {  // pretend this decodes an image
                        long work = 0;
                        for (int i = 0; i < 20000; ++i) work += (id * i) % 7;
                        return static_cast<long>(id) + work * 0;
                      })
                      .tag("expensive")
                      .map([](long value) { return value * 2; })  // cheap: stays as it is
                      .batch(16);
  dpipe::DataLoader2<std::vector<long>> loader(pipeline, ParallelizeExpensiveMaps(/*threads=*/2));
  // [use]
  long total = 0;
  std::size_t batches = 0;
  for (const auto& batch : loader) {
    for (long value : batch) total += value;
    ++batches;
  }
  std::printf("before: %s",
              dpipe::graph::to_dot(loader.graph_before_reading_service()).find("threadpool_map") == std::string::npos
                  ? "no threadpool_map\n"
                  : "threadpool_map\n");
  std::printf("after: %s", dpipe::graph::to_dot(loader.graph()).find("threadpool_map") != std::string::npos
                               ? "threadpool_map\n"
                               : "no threadpool_map\n");
  std::printf("%zu batches, total %ld\n", batches, total);  // the same data, in the same order
}

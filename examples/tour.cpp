// The README's tour of the API, compiled and run by ctest.

#include <cstdio>
#include <string>
#include <vector>

#include <dpipe/dpipe.hpp>

int main() {
  // [tour]
  // Build a graph of typed nodes, torchdata-style...
  std::vector<int> ids(100);
  for (int i = 0; i < 100; ++i) ids[static_cast<std::size_t>(i)] = i;
  auto pipe = dpipe::iter::from(ids)
                  .shuffle()          // seeded per epoch, bit-identical to torchdata
                  .sharding_filter()  // each worker / rank keeps its share
                  .map([](int id) { return "sample-" + std::to_string(id); })
                  .batch(32);

  // ...or with | adaptors, which is also how your own nodes plug in.
  auto same = dpipe::iter::from(ids) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() |
              dpipe::iter::map([](int id) { return "sample-" + std::to_string(id); }) | dpipe::iter::batch(32);

  // Seed an epoch and iterate: a pipeline is a range.
  dpipe::SeedGenerator seeds(/*seed=*/0);
  dpipe::graph::set_graph_random_seed(pipe.ptr(), seeds);
  for (auto& batch : pipe) std::printf("a batch of %zu, first %s\n", batch.size(), batch.front().c_str());

  // Checkpoint in the middle of an epoch; restore into a pipeline built by the same code.
  auto it = same.begin();
  ++it;
  const std::vector<std::byte> checkpoint = dpipe::graph::save_state(same);
  // [tour]
  std::printf("checkpoint: %zu bytes\n", checkpoint.size());
}

// A pipeline of a user type whose element machinery another translation unit compiles
// (<dpipe/core/element_type.hpp>, docs/building.md#compile-time): this file compiles only its
// nodes, and the samples still cross worker processes.

#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <dpipe/dpipe.hpp>

#include "compiled_once_sample.hpp"

int main() {
  std::vector<int> ids(8);
  std::iota(ids.begin(), ids.end(), 0);
  auto samples = dpipe::iter::from(ids).sharding_filter().map([](int id) {
    return trainer::Sample{id, "shard-" + std::to_string(id % 2) + "/" + std::to_string(id) + ".jpg"};
  });
  dpipe::DataLoader2<trainer::Sample> loader(samples, dpipe::MultiProcessingReadingService({.num_workers = 2}));
  for (const auto& sample : loader) std::printf("%lld %s\n", static_cast<long long>(sample.id), sample.path.c_str());
}

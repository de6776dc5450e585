// The translation unit of a trainer: a five-node pipeline and a loader with worker processes.
// benchmarks/compile_time.sh measures how long it takes to compile, beside an empty one.

#include <cstdio>
#include <numeric>
#include <vector>

#include <dpipe/dpipe.hpp>

int main() {
  std::vector<int> ids(1000);
  std::iota(ids.begin(), ids.end(), 0);
  auto pipe = dpipe::iter::from(ids).shuffle().sharding_filter().map([](int id) { return id * 2; }).batch(16);
  dpipe::DataLoader2<std::vector<int>> loader(pipe, dpipe::MultiProcessingReadingService({.num_workers = 2}));
  long sum = 0;
  for (auto& batch : loader) sum += batch.front();
  std::printf("%ld\n", sum);
}

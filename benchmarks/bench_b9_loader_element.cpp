// B9 (issue 30): the loader's per-element path. 10M int64, unbatched, in process: a DataLoader2
// over from(values) against node.next() on the same kind of pipeline, read in turn, the best of 7
// runs each. Goal: the loader at most 1.5x node.next().

#include <cstdint>
#include <cstdio>
#include <vector>

#include <dpipe/dpipe.hpp>

#include "harness.hpp"

namespace {

constexpr std::int64_t kCount = 10'000'000;
constexpr int kRepeats = 7;

}  // namespace

int main() {
  std::vector<std::int64_t> values(static_cast<std::size_t>(kCount));
  for (std::int64_t i = 0; i < kCount; ++i) values[static_cast<std::size_t>(i)] = i;
  const auto pipe = dpipe::iter::from(values);
  dpipe::DataLoader2<std::int64_t> loader(pipe);

  std::uint64_t node_sum = 0;
  std::uint64_t loader_sum = 0;
  std::uint64_t elements = 0;
  const auto [by_node, by_loader] = dpipe::bench::best_seconds_in_turn(
      kRepeats,
      [&] {
        // The node as the loader holds it: through its base, so that next() is a virtual call.
        auto& node = *dpipe::bench::opaque<dpipe::IterDataPipe<std::int64_t>>(&pipe.node());
        node.reset();
        std::uint64_t sum = 0;
        std::uint64_t count = 0;
        while (auto element = node.next()) {
          sum += static_cast<std::uint64_t>(*element);
          ++count;
        }
        node_sum = sum;
        return count;
      },
      [&] {
        std::uint64_t sum = 0;
        std::uint64_t count = 0;
        for (const std::int64_t element : loader) {
          sum += static_cast<std::uint64_t>(element);
          ++count;
        }
        loader_sum = sum;
        return count;
      },
      elements);

  std::printf("B9 loader per element: 10M int64, unbatched, in process\n");
  const double node_rate = dpipe::bench::report("node.next()", by_node, elements);
  const double loader_rate = dpipe::bench::report("DataLoader2", by_loader, elements);
  const bool same = node_sum == loader_sum;
  std::printf(
      "B9 result: node.next() %.1f ns per element, DataLoader2 %.1f ns per element, ratio %.2fx (goal <= 1.5x)%s\n",
      1e9 / node_rate, 1e9 / loader_rate, node_rate / loader_rate, same ? "" : "  CHECKSUM MISMATCH");
  return same ? 0 : 1;
}

// Checkpoint save latency (issue 33, point 19): DataLoader2::state_dict() taken 50 times mid-epoch
// while iterating, with 2 worker processes behind a sharding_filter and with 2 worker processes fed
// by a dispatching process. Prints the median and the maximum of the 50 saves, with batches of 16.
// (A worker's prefetch counts do not bound how far it runs ahead: with small elements it may have
// 64 KiB of them in flight. What keeps a fed worker within the 1000 elements the dispatching process
// may buffer for a worker that lags is its lead: its unread batches stand for at most 500.)

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <range/v3/view/iota.hpp>

#include <dpipe/dpipe.hpp>

#include "harness.hpp"

namespace {

constexpr std::int64_t kCount = 10'000'000;
constexpr int kSaves = 50;
constexpr std::uint64_t kBatchesBetweenSaves = 200;

using Batch = std::vector<std::int64_t>;

dpipe::DataLoader2<Batch> make_loader(bool dispatch) {
  auto source = dpipe::iter::from(ranges::views::iota(std::int64_t{0}, kCount)).shuffle(10000);
  const auto map = [](std::int64_t x) { return x * 3; };
  const dpipe::IterPipe<Batch> pipeline =
      dispatch ? source.sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing).map(map).batch(16)
               : source.sharding_filter().map(map).batch(16);
  return dpipe::DataLoader2<Batch>(pipeline, dpipe::MultiProcessingReadingService({.num_workers = 2}));
}

/// The seconds each of `kSaves` state_dict() calls takes, one every `kBatchesBetweenSaves` batches.
std::vector<double> save_seconds(bool dispatch) {
  auto loader = make_loader(dispatch);
  loader.seed(1);
  std::vector<double> saves;
  std::uint64_t taken = 0;
  for (auto& batch : loader) {
    dpipe::bench::keep(batch.data());
    if (++taken % kBatchesBetweenSaves != 0) continue;
    const auto start = std::chrono::steady_clock::now();
    dpipe::bench::keep(loader.state_dict().size());
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    saves.push_back(took.count());
    if (saves.size() == kSaves) break;
  }
  return saves;
}

void report(const char* what, std::vector<double> saves) {
  std::ranges::sort(saves);
  const double median = (saves[(saves.size() - 1) / 2] + saves[saves.size() / 2]) / 2;
  std::printf("  %-36s median %8.3f ms, max %8.3f ms over %zu saves\n", what, median * 1e3, saves.back() * 1e3,
              saves.size());
}

}  // namespace

int main() {
  std::printf("Save: 10M int64 -> shuffle(10000) -> [sharding] -> map -> batch(16), state_dict() every %llu batches\n",
              static_cast<unsigned long long>(kBatchesBetweenSaves));
  report("2 worker processes, sharding_filter:", save_seconds(false));
  report("2 worker processes, dispatching:", save_seconds(true));
}

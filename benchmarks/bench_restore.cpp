// Restore cost (SPEC §9): restoring a DataLoader2 checkpoint does not replay the epoch, so it costs
// about the same after 10 elements as after 10M. Prints the time from load_state_dict to the first
// element after each, and their ratio.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <range/v3/view/iota.hpp>

#include <dpipe/dpipe.hpp>

#include "harness.hpp"

namespace {

constexpr std::int64_t kCount = 12'000'000;

dpipe::DataLoader2<std::vector<std::int64_t>> make_loader() {
  auto pipeline = dpipe::iter::from(ranges::views::iota(std::int64_t{0}, kCount))
                      .shuffle(10000)
                      .sharding_filter()
                      .map([](std::int64_t x) { return x * 3; })
                      .batch(64);
  return dpipe::DataLoader2<std::vector<std::int64_t>>(pipeline, dpipe::InProcessReadingService(8));
}

/// A checkpoint taken after `batches` batches of an epoch seeded with 1.
std::vector<std::byte> checkpoint_after(std::uint64_t batches) {
  auto loader = make_loader();
  loader.seed(1);
  std::uint64_t taken = 0;
  for (auto& batch : loader) {
    dpipe::bench::keep(batch.data());
    if (++taken == batches) break;
  }
  return loader.state_dict();
}

/// Seconds from load_state_dict to the first element of the restored loader (best of 5).
double restore_seconds(const std::vector<std::byte>& checkpoint) {
  double best = 1e300;
  for (int i = 0; i < 5; ++i) {
    auto loader = make_loader();
    const auto start = std::chrono::steady_clock::now();
    loader.load_state_dict(checkpoint);
    auto it = loader.begin();
    dpipe::bench::keep((*it).data());
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  return best;
}

}  // namespace

/// Seconds to read `batches` batches from a fresh loader: what restoring by replay would cost.
double replay_seconds(std::uint64_t batches) {
  auto loader = make_loader();
  loader.seed(1);
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t taken = 0;
  for (auto& batch : loader) {
    dpipe::bench::keep(batch.data());
    if (++taken == batches) break;
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return took.count();
}

int main() {
  constexpr std::uint64_t kLateBatches = 10'000'000 / 64;
  const auto early = checkpoint_after(1);            // 64 elements
  const auto late = checkpoint_after(kLateBatches);  // 10M elements
  const double early_seconds = restore_seconds(early);
  const double late_seconds = restore_seconds(late);
  std::printf("Restore: 12M int64 -> shuffle(10000) -> sharding_filter -> map -> batch(64), InProcess(prefetch 8)\n");
  std::printf("  checkpoint after 64 elements:  %8zu bytes, restore to first batch %8.3f ms\n", early.size(),
              early_seconds * 1e3);
  std::printf("  checkpoint after 10M elements: %8zu bytes, restore to first batch %8.3f ms\n", late.size(),
              late_seconds * 1e3);
  const double replay = replay_seconds(kLateBatches);
  std::printf("  replaying the first 10M elements instead:                              %8.3f ms\n", replay * 1e3);
  std::printf("Restore result: restore after 10M / after 64 = %.2fx; replay / restore after 10M = %.0fx\n",
              late_seconds / early_seconds, replay / late_seconds);
}

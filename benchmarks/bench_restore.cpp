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

/// A checkpoint taken after `batches` batches of an epoch seeded with 1, of a loader `make()` builds.
template <class Make>
std::vector<std::byte> checkpoint_after(const Make& make, std::uint64_t batches) {
  auto loader = make();
  loader.seed(1);
  std::uint64_t taken = 0;
  for (auto& batch : loader) {
    dpipe::bench::keep(batch.data());
    if (++taken == batches) break;
  }
  return loader.state_dict();
}

/// Seconds from load_state_dict to the first element of a loader `make()` builds (best of 5).
template <class Make>
double restore_seconds(const Make& make, const std::vector<std::byte>& checkpoint) {
  double best = 1e300;
  for (int i = 0; i < 5; ++i) {
    auto loader = make();
    const auto start = std::chrono::steady_clock::now();
    loader.load_state_dict(checkpoint);
    auto it = loader.begin();
    dpipe::bench::keep((*it).data());
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  return best;
}

/// The global order over the same 12M elements, in process or with 2 worker threads.
dpipe::DataLoader2<std::vector<std::int64_t>> make_global_loader(bool threads) {
  static const auto source = [] {
    std::vector<std::int64_t> values(static_cast<std::size_t>(kCount));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int64_t>(i);
    return dpipe::map::from(std::move(values));
  }();
  const dpipe::IterPipe<std::vector<std::int64_t>> pipeline =
      dpipe::global_order(source).map([](std::int64_t x) { return x * 3; }).batch(64);
  if (!threads) return dpipe::DataLoader2<std::vector<std::int64_t>>(pipeline);
  return dpipe::DataLoader2<std::vector<std::int64_t>>(
      pipeline, dpipe::MultiProcessingReadingService({.num_workers = 2, .worker_kind = dpipe::WorkerKind::kThread}));
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
  const auto early = checkpoint_after(make_loader, 1);            // 64 elements
  const auto late = checkpoint_after(make_loader, kLateBatches);  // 10M elements
  const double early_seconds = restore_seconds(make_loader, early);
  const double late_seconds = restore_seconds(make_loader, late);
  std::printf("Restore: 12M int64 -> shuffle(10000) -> sharding_filter -> map -> batch(64), InProcess(prefetch 8)\n");
  std::printf("  checkpoint after 64 elements:  %8zu bytes, restore to first batch %8.3f ms\n", early.size(),
              early_seconds * 1e3);
  std::printf("  checkpoint after 10M elements: %8zu bytes, restore to first batch %8.3f ms\n", late.size(),
              late_seconds * 1e3);
  const double replay = replay_seconds(kLateBatches);
  std::printf("  replaying the first 10M elements instead:                              %8.3f ms\n", replay * 1e3);
  std::printf("Restore result: restore after 10M / after 64 = %.2fx; replay / restore after 10M = %.0fx\n",
              late_seconds / early_seconds, replay / late_seconds);

  // Saved in process, restored onto 2 worker threads.
  const auto in_process = [] { return make_global_loader(false); };
  const auto with_threads = [] { return make_global_loader(true); };
  const auto global_early_state = checkpoint_after(in_process, 1);
  const auto global_late_state = checkpoint_after(in_process, kLateBatches);
  const double global_early = restore_seconds(with_threads, global_early_state);
  const double global_late = restore_seconds(with_threads, global_late_state);
  std::printf(
      "Elastic restore: 12M int64 -> global_order -> map -> batch(64), saved in process, restored onto 2 worker "
      "threads\n");
  std::printf("  checkpoint after 64 elements:  %8zu bytes, restore to first batch %8.3f ms\n",
              global_early_state.size(), global_early * 1e3);
  std::printf("  checkpoint after 10M elements: %8zu bytes, restore to first batch %8.3f ms\n",
              global_late_state.size(), global_late * 1e3);
  std::printf("Elastic restore result: after 10M / after 64 = %.2fx\n", global_late / global_early);
}

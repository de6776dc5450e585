// B3 (SPEC §11): CPU-bound scaling. Each element costs about 20 microseconds of arithmetic; 0, 1
// and 2 worker processes, and 2 worker threads. Targets on a 2-core machine: 2 worker processes at
// least 1.7x the in-process rate, 2 worker threads at least 1.9x (issue 14).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <vector>

#include <dpipe/dpipe.hpp>

#include "harness.hpp"

namespace {

constexpr std::size_t kCount = 60'000;
constexpr int kRepeats = 3;

/// `rounds` rounds of integer mixing: the element's cost.
std::uint64_t work(std::uint64_t x, std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i) x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ULL + i;
  return x;
}

/// The rounds that take about 20 microseconds on this machine.
std::uint64_t calibrate() {
  constexpr std::uint64_t kProbe = 2'000'000;
  const auto start = std::chrono::steady_clock::now();
  dpipe::bench::keep(work(1, kProbe));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<std::uint64_t>(static_cast<double>(kProbe) * 20e-6 / seconds);
}

}  // namespace

int main() {
  const std::uint64_t rounds = calibrate();
  std::vector<std::uint64_t> values(kCount);
  std::iota(values.begin(), values.end(), std::uint64_t{0});
  std::uint64_t expected = 0;
  for (const auto x : values) expected ^= work(x, rounds);
  const auto pipe =
      dpipe::iter::from(values).sharding_filter().map([rounds](std::uint64_t x) { return work(x, rounds); });

  std::printf("B3 CPU-bound: %zu elements of ~20 us (%llu rounds) each\n", kCount,
              static_cast<unsigned long long>(rounds));
  bool ok = true;
  const auto read_epoch = [&](auto& loader) {
    std::uint64_t count = 0;
    std::uint64_t checksum = 0;
    for (const auto x : loader) {
      ++count;
      checksum ^= x;
    }
    ok = ok && count == kCount && checksum == expected;
    return count;
  };
  dpipe::DataLoader2<std::uint64_t> in_process(pipe, dpipe::InProcessReadingService());
  const double base = dpipe::bench::measure_epochs("in process (0 workers)", kRepeats, in_process, read_epoch);
  dpipe::DataLoader2<std::uint64_t> one(pipe, dpipe::MultiProcessingReadingService({.num_workers = 1}));
  const double rate1 =
      dpipe::bench::measure_epochs("MultiProcessingReadingService, 1 worker", kRepeats, one, read_epoch);
  dpipe::DataLoader2<std::uint64_t> two(pipe, dpipe::MultiProcessingReadingService({.num_workers = 2}));
  const double rate2 =
      dpipe::bench::measure_epochs("MultiProcessingReadingService, 2 workers", kRepeats, two, read_epoch);
  dpipe::DataLoader2<std::uint64_t> threads(
      pipe, dpipe::MultiProcessingReadingService({.num_workers = 2, .worker_kind = dpipe::WorkerKind::kThread}));
  const double rate_threads =
      dpipe::bench::measure_epochs("MultiProcessingReadingService, 2 threads", kRepeats, threads, read_epoch);
  std::printf(
      "B3 result: 1 worker %.2fx, 2 workers %.2fx the in-process rate (target >= 1.7x); 2 threads %.2fx (target >= "
      "1.9x)%s\n",
      rate1 / base, rate2 / base, rate_threads / base, ok ? "" : "  WRONG OUTPUT");
  return ok ? 0 : 1;
}

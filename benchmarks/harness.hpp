#pragma once
// A tiny benchmark harness: runs a workload several times and reports the best rate, so that
// each workload prints one line next to its baseline measured in the same run.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>

namespace dpipe::bench {

/// Keeps `value` alive so the optimizer cannot drop the work that produced it.
template <class T>
void keep(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

/// `pointer`, which the optimizer can no longer trace to what it points at: a call through it
/// stays the virtual call it is in code that holds a node by its base.
template <class T>
T* opaque(T* pointer) {
  asm volatile("" : "+r"(pointer));
  return pointer;
}

/// The seconds one run of `work` takes; `work` returns the number of elements it processed.
inline double seconds_of(const std::function<std::uint64_t()>& work, std::uint64_t& elements) {
  const auto start = std::chrono::steady_clock::now();
  elements = work();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return took.count();
}

/// The best of `repeats` runs of `work`, in seconds. `work` returns the number of elements it
/// processed, which must be the same each run.
inline double best_seconds(int repeats, const std::function<std::uint64_t()>& work, std::uint64_t& elements) {
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) best = std::min(best, seconds_of(work, elements));
  return best;
}

/// The best wall time of `repeats` runs of the shell command `command`, in seconds; a command that
/// fails is reported.
inline double best_command_seconds(int repeats, const std::string& command) {
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (std::system(command.c_str()) != 0) std::printf("  (the command failed: %s)\n", command.c_str());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

/// The best of `repeats` runs of `first` and of `second`, in seconds, run in turn: a slow spell
/// of a shared machine then falls on both alike, and their ratio holds. Both return the same
/// number of elements each run.
inline std::pair<double, double> best_seconds_in_turn(int repeats, const std::function<std::uint64_t()>& first,
                                                      const std::function<std::uint64_t()>& second,
                                                      std::uint64_t& elements) {
  std::pair<double, double> best{1e300, 1e300};
  for (int i = 0; i < repeats; ++i) {
    best.first = std::min(best.first, seconds_of(first, elements));
    best.second = std::min(best.second, seconds_of(second, elements));
  }
  return best;
}

/// Prints "name: rate M elements/s" lines and returns the rate in elements per second.
inline double report(const std::string& name, double seconds, std::uint64_t elements) {
  const double rate = static_cast<double>(elements) / seconds;
  std::printf("  %-44s %10.2f M elements/s  (%.3f s)\n", name.c_str(), rate / 1e6, seconds);
  return rate;
}

/// Reads whole epochs of `loader`, the best of `repeats`, and reports the rate as `name`.
/// `read_epoch(loader)` reads one epoch and returns how many elements it saw.
template <class Loader, class ReadEpoch>
double measure_epochs(const std::string& name, int repeats, Loader& loader, ReadEpoch read_epoch) {
  std::uint64_t elements = 0;
  const double seconds = best_seconds(
      repeats, [&] { return read_epoch(loader); }, elements);
  return report(name, seconds, elements);
}

}  // namespace dpipe::bench

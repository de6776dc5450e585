// B4 (SPEC §11): bandwidth. 1 MiB byte buffers made in 2 workers and received by the main process,
// against the machine's single-thread memcpy bandwidth over buffers larger than the caches,
// measured in the same run. Target: at least 40% of memcpy. Each buffer is copied into shared
// memory by a worker and out of it by the main process; 1 MiB buffers stay in the caches, so the
// in-cache memcpy rate is printed too, for context. Worker threads hand the buffers over without a
// copy: their row is set against 2 threads making the same buffers with nothing consuming them
// (target: within 10%, issue 14). Both are measured twice: with glibc malloc's defaults, and with
// its heap trimming and its mmap threshold set high (mallopt), as docs/reading-services.md
// advises for large elements and worker threads; the second time also with prefetch counts of 1.
// The same buffers as dpipe::Tensors, whose memory the loader recycles, are measured at glibc's
// defaults (issue 34's target: worker threads at least the worker processes' rate).

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <malloc.h>
#include <numeric>
#include <thread>
#include <vector>

#include <dpipe/dpipe.hpp>

#include "bandwidth.hpp"
#include "harness.hpp"

namespace {

using dpipe::bench::kBufferBytes;
using dpipe::bench::make_buffer;

constexpr std::size_t kBuffers = 3000;
constexpr int kRepeats = 3;

/// Single-thread memcpy bandwidth in bytes/s, copying `total` bytes in blocks of `block` bytes
/// between two buffers of `block` bytes.
double memcpy_bandwidth(std::size_t block, std::size_t total) {
  std::vector<std::uint8_t> from(block, 1);
  std::vector<std::uint8_t> to(block, 2);
  std::uint64_t elements = 0;
  const double seconds = dpipe::bench::best_seconds(
      kRepeats,
      [&] {
        for (std::size_t copied = 0; copied < total; copied += block) {
          std::memcpy(to.data(), from.data(), block);
          dpipe::bench::keep(to.data());
        }
        return std::uint64_t{1};
      },
      elements);
  return static_cast<double>(total) / seconds;
}

/// Bytes/s at which 2 threads make kBuffers buffers (each every second one) and drop them.
double making_rate() {
  std::uint64_t elements = 0;
  const double seconds = dpipe::bench::best_seconds(
      kRepeats,
      [] {
        const auto make_share = [](std::uint32_t first) {
          for (auto id = first; id < kBuffers; id += 2) {
            const auto buffer = make_buffer(id);
            // A byte of every page, read as a consumer would: the optimizer must make the buffer.
            const volatile std::uint8_t* bytes = buffer.data();
            std::uint64_t sum = 0;
            for (std::size_t at = 0; at < buffer.size(); at += 4096) sum += bytes[at];
            dpipe::bench::keep(sum);
          }
        };
        std::thread other(make_share, 1U);
        make_share(0U);
        other.join();
        return std::uint64_t{kBuffers};
      },
      elements);
  return static_cast<double>(elements * kBufferBytes) / seconds;
}

}  // namespace

int main() {
  const double memcpy_rate = memcpy_bandwidth(std::size_t{256} << 20, std::size_t{256} << 20);  // the target's base
  const double cached_rate = memcpy_bandwidth(kBufferBytes, kBuffers * kBufferBytes);           // for context
  std::vector<std::uint32_t> ids(kBuffers);
  std::iota(ids.begin(), ids.end(), 0U);
  auto pipe = dpipe::iter::from(ids).sharding_filter().map(make_buffer);
  bool ok = true;
  dpipe::DataLoader2<std::vector<std::uint8_t>> processes(pipe,
                                                          dpipe::MultiProcessingReadingService({.num_workers = 2}));
  const double rate = dpipe::bench::buffer_rate(processes, kBuffers, kRepeats, ok);
  dpipe::DataLoader2<std::vector<std::uint8_t>> threads(
      pipe, dpipe::MultiProcessingReadingService({.num_workers = 2, .worker_kind = dpipe::WorkerKind::kThread}));
  const double thread_rate = dpipe::bench::buffer_rate(threads, kBuffers, kRepeats, ok);
  const double made_rate = making_rate();
  // The same buffers as dpipe::Tensors, at glibc's defaults still: their memory comes from the
  // loader's recycling pool, so a buffer the loop drops serves a later one with its pages mapped.
  auto tensor_pipe = dpipe::iter::from(ids).sharding_filter().map(dpipe::bench::make_tensor_buffer);
  dpipe::DataLoader2<dpipe::Tensor> tensor_processes(tensor_pipe,
                                                     dpipe::MultiProcessingReadingService({.num_workers = 2}));
  const double tensor_rate = dpipe::bench::buffer_rate(tensor_processes, kBuffers, kRepeats, ok);
  dpipe::DataLoader2<dpipe::Tensor> tensor_threads(
      tensor_pipe, dpipe::MultiProcessingReadingService({.num_workers = 2, .worker_kind = dpipe::WorkerKind::kThread}));
  const double tensor_thread_rate = dpipe::bench::buffer_rate(tensor_threads, kBuffers, kRepeats, ok);
  // From here on glibc keeps freed memory in the heap: a buffer the loop frees is not given back
  // to the kernel, so the worker's next one does not fault its pages in again.
  const bool tuned = mallopt(M_MMAP_THRESHOLD, 64 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 512 << 20) == 1;
  const double tuned_thread_rate = dpipe::bench::buffer_rate(threads, kBuffers, kRepeats, ok);
  // Prefetch counts for large elements: 2-3 buffers per worker in flight instead of 16, so the
  // ones a worker fills are still in the caches (the default counts keep 32 MiB in flight).
  dpipe::DataLoader2<std::vector<std::uint8_t>> few_threads(
      pipe, dpipe::MultiProcessingReadingService({.num_workers = 2,
                                                  .worker_kind = dpipe::WorkerKind::kThread,
                                                  .worker_prefetch_cnt = 1,
                                                  .main_prefetch_cnt = 1}));
  const double few_thread_rate = dpipe::bench::buffer_rate(few_threads, kBuffers, kRepeats, ok);
  const double tuned_made_rate = making_rate();
  std::printf("B4 bandwidth: %zu buffers of 1 MiB made in 2 workers\n", kBuffers);
  std::printf("  %-44s %10.2f GB/s\n", "memcpy, one thread, 256 MiB buffers", memcpy_rate / 1e9);
  std::printf("  %-44s %10.2f GB/s\n", "memcpy, one thread, 1 MiB buffers (cached)", cached_rate / 1e9);
  std::printf("  %-44s %10.2f GB/s\n", "2 threads making them, nothing consuming", made_rate / 1e9);
  std::printf("  %-44s %10.2f GB/s\n", "MultiProcessingReadingService, 2 workers", rate / 1e9);
  std::printf("  %-44s %10.2f GB/s\n", "MultiProcessingReadingService, 2 threads", thread_rate / 1e9);
  std::printf("  the same buffers as dpipe::Tensor (recycled buffers), glibc's defaults:\n");
  std::printf("  %-44s %10.2f GB/s\n", "MultiProcessingReadingService, 2 workers", tensor_rate / 1e9);
  std::printf("  %-44s %10.2f GB/s\n", "MultiProcessingReadingService, 2 threads", tensor_thread_rate / 1e9);
  std::printf("  with mallopt(M_MMAP_THRESHOLD, 64 MiB), mallopt(M_TRIM_THRESHOLD, 512 MiB):\n");
  std::printf("  %-44s %10.2f GB/s\n", "2 threads making them, nothing consuming", tuned_made_rate / 1e9);
  std::printf("  %-44s %10.2f GB/s\n", "MultiProcessingReadingService, 2 threads", tuned_thread_rate / 1e9);
  std::printf("  %-44s %10.2f GB/s\n", "the same, prefetch counts 1 and 1", few_thread_rate / 1e9);
  std::printf(
      "B4 result: %.2f GB/s, %.0f%% of memcpy (target >= 40%%); 2 threads %.2f GB/s, %.0f%% of making them, with "
      "glibc's trimming off %.2f GB/s, %.0f%%, and prefetch counts 1 and 1 %.2f GB/s, %.0f%% (target >= 90%%)%s\n",
      rate / 1e9, 100.0 * rate / memcpy_rate, thread_rate / 1e9, 100.0 * thread_rate / made_rate,
      tuned_thread_rate / 1e9, 100.0 * tuned_thread_rate / tuned_made_rate, few_thread_rate / 1e9,
      100.0 * few_thread_rate / tuned_made_rate, ok && tuned ? "" : "  WRONG OUTPUT");
  std::printf(
      "B4 tensors at glibc's defaults: 2 threads %.2f GB/s, %.2fx the 2 worker processes' %.2f GB/s with "
      "vectors (target >= 1x), %.2fx with tensors (%.2f GB/s)\n",
      tensor_thread_rate / 1e9, tensor_thread_rate / rate, rate / 1e9, tensor_thread_rate / tensor_rate,
      tensor_rate / 1e9);
  return ok && tuned ? 0 : 1;
}

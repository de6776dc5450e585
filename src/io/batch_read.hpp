#pragma once
/// \file
/// BatchReader: many positioned reads done at once, with one io_uring submission where the kernel
/// allows it and one pread each where it does not. indexed_records reads the records that a
/// global order's hints name with it. Private to dpipe::io: liburing is included by
/// batch_read.cpp alone.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <sys/types.h>

struct io_uring;  // <liburing.h>

namespace dpipe::io::detail {

/// One read of a batch: `size` bytes at `offset` of `descriptor` into `data`. `result` is what
/// came back: the bytes read (fewer than `size` at the end of the file, or when the read was cut
/// short) or -errno.
struct BatchRead {
  int descriptor = -1;
  char* data = nullptr;
  std::size_t size = 0;
  std::uint64_t offset = 0;
  std::int64_t result = 0;
};

/// Does batches of reads: through an io_uring ring of its own, made on first use and made again
/// in a child after fork() (a ring is never shared across processes), closed with the reader; or,
/// where io_uring_queue_init fails (an old kernel, a seccomp filter, io_uring_disabled), with one
/// pread each, logged once per process at debug level. Thread-safety: one thread at a time.
class BatchReader {
 public:
  /// The most reads one batch holds: the ring's size.
  static constexpr std::size_t kMaxReads = 64;

  BatchReader() noexcept;
  BatchReader(const BatchReader&) = delete;
  BatchReader& operator=(const BatchReader&) = delete;
  ~BatchReader();

  /// Does every read of `reads` and sets its result; returns once all are done (one
  /// io_uring_enter that submits them all and waits for all their completions, or one pread
  /// each; a batch of one read is a pread). A read is done once: a result short of its size or an error is left to the
  /// caller, who reads on with pread from where it stopped. Never throws. REQUIRES: reads.size() <= kMaxReads.
  void read(std::span<BatchRead> reads) noexcept;

 private:
  /// This process's ring, made when missing; null when io_uring is not to be had.
  io_uring* ring() noexcept;
  void close_ring() noexcept;
  /// Submits `reads` to the ring and waits for them; false when the ring failed (it is closed,
  /// and the reads not done yet are left with result -ECANCELED).
  bool read_with_ring(io_uring& ring, std::span<BatchRead> reads) noexcept;

  std::unique_ptr<io_uring> ring_;
  pid_t ring_pid_ = 0;        // the process ring_ was made in
  bool unavailable_ = false;  // io_uring_queue_init failed in this process: preads
};

/// For tests: how many reads of batches this process has done through io_uring. Thread-safe.
[[nodiscard]] std::uint64_t ring_reads() noexcept;
/// For tests: how many rings this process has made. Thread-safe.
[[nodiscard]] std::uint64_t rings_made() noexcept;
/// For tests: whether BatchReaders use io_uring (true, the default, where the kernel has it) or
/// preads. Thread-safe.
void set_io_uring_enabled(bool enabled) noexcept;

}  // namespace dpipe::io::detail

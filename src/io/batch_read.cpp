#include "io/batch_read.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <liburing.h>
#include <limits>
#include <new>
#include <unistd.h>
#include <utility>

#include <dpipe/core/logging.hpp>

namespace dpipe::io::detail {
namespace {

/// A read not done yet.
constexpr std::int64_t kPending = std::numeric_limits<std::int64_t>::min();

std::atomic<std::uint64_t> ring_read_count{0};
std::atomic<std::uint64_t> ring_count{0};
std::atomic<bool> io_uring_enabled{true};

/// Logs, once per process, that batches are read with preads, and why.
void log_unavailable(const char* why) noexcept {
  static std::atomic<bool> logged{false};
  if (logged.exchange(true)) return;
  try {
    log_debug("batched reads: io_uring is not to be had ({}): a batch of reads is one pread each", why);
  } catch (...) {  // a hint of how reads go is not worth an error
  }
}

/// One pread of `read`, again after EINTR.
void pread_once(BatchRead& read) noexcept {
  ssize_t got = 0;
  do {
    got = ::pread(read.descriptor, read.data, read.size, static_cast<off_t>(read.offset));
  } while (got < 0 && errno == EINTR);
  read.result = got < 0 ? -std::int64_t{errno} : std::int64_t{got};
}

}  // namespace

BatchReader::BatchReader() noexcept = default;

BatchReader::~BatchReader() { close_ring(); }

void BatchReader::close_ring() noexcept {
  if (!ring_) return;
  // In a child after fork() this unmaps and closes the child's copy only: the parent's ring lives on.
  io_uring_queue_exit(ring_.get());
  ring_.reset();
}

io_uring* BatchReader::ring() noexcept {
  if (!io_uring_enabled.load(std::memory_order_relaxed)) return nullptr;
  const pid_t pid = ::getpid();
  if (ring_ && ring_pid_ != pid) close_ring();  // made by the parent: its completions are not ours
  if (ring_ || unavailable_) return ring_.get();
  std::unique_ptr<io_uring> ring(new (std::nothrow) io_uring{});
  if (!ring) return nullptr;
  const int status = io_uring_queue_init(static_cast<unsigned>(kMaxReads), ring.get(), 0);
  if (status < 0) {
    unavailable_ = true;
    log_unavailable(std::strerror(-status));
    return nullptr;
  }
  ring_ = std::move(ring);
  ring_pid_ = pid;
  ring_count.fetch_add(1, std::memory_order_relaxed);
  return ring_.get();
}

bool BatchReader::read_with_ring(io_uring& ring, std::span<BatchRead> reads) noexcept {
  for (std::size_t i = 0; i < reads.size(); ++i) {
    io_uring_sqe* entry = io_uring_get_sqe(&ring);
    if (entry == nullptr) {  // cannot happen with the ring drained; the prepared entries go with the ring
      close_ring();
      return false;
    }
    BatchRead& read = reads[i];
    io_uring_prep_read(entry, read.descriptor, read.data, static_cast<unsigned>(read.size), read.offset);
    entry->user_data = i;
  }
  const auto count = static_cast<unsigned>(reads.size());
  int status = 0;
  do {
    status = io_uring_submit_and_wait(&ring, count);  // one io_uring_enter: submit all, wait for all
  } while (status == -EINTR);
  unsigned submitted = status > 0 ? static_cast<unsigned>(status) : 0;
  while (status > 0 && submitted < count) {  // the kernel took fewer than all: offer it the rest
    status = io_uring_submit(&ring);
    if (status > 0) submitted += static_cast<unsigned>(status);
    if (status == -EINTR) status = 1;  // nothing taken; offer them again
  }
  // Every submitted read is waited for, whatever else failed: the kernel writes into their buffers.
  for (unsigned done = 0; done < submitted;) {
    io_uring_cqe* completion = nullptr;
    const int waited = io_uring_wait_cqe(&ring, &completion);
    if (waited == -EINTR || waited == -EAGAIN) continue;
    if (waited < 0) {
      close_ring();
      return false;
    }
    if (completion->user_data < reads.size()) reads[completion->user_data].result = completion->res;
    io_uring_cqe_seen(&ring, completion);
    ++done;
  }
  ring_read_count.fetch_add(submitted, std::memory_order_relaxed);
  if (submitted == count) return true;
  close_ring();  // reads left in its submission queue must never run later
  return false;
}

void BatchReader::read(std::span<BatchRead> reads) noexcept {
  if (reads.empty()) return;
  for (BatchRead& read : reads) read.result = kPending;
  // One read has nothing to overlap with: a pread costs one system call, as the ring would.
  if (io_uring* ring = reads.size() > 1 ? this->ring() : nullptr; ring != nullptr && !read_with_ring(*ring, reads)) {
    unavailable_ = true;  // a ring that failed once is not tried again
    log_unavailable("the ring failed");
  }
  for (BatchRead& read : reads)
    if (read.result == kPending) pread_once(read);
}

std::uint64_t ring_reads() noexcept { return ring_read_count.load(std::memory_order_relaxed); }

std::uint64_t rings_made() noexcept { return ring_count.load(std::memory_order_relaxed); }

void set_io_uring_enabled(bool enabled) noexcept { io_uring_enabled.store(enabled, std::memory_order_relaxed); }

}  // namespace dpipe::io::detail

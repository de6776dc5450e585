#pragma once
// Bell: an eventcount on a futex in memory shared between processes. A process waits on its own
// bell when it cannot make progress; another process rings it after publishing what the waiter may
// want. Private to the library.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace dpipe::detail::transport {

/// Thread-safety: any number of ringers and waiters, in any processes sharing the memory. Waiting
/// is race-free when the waiter calls prepare(), re-checks its condition, then wait() or cancel(),
/// and the ringer publishes (with a release store or stronger) before ring().
class Bell {
 public:
  /// Announces a waiter; returns the key wait() needs.
  std::uint32_t prepare() noexcept {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return sequence_.load(std::memory_order_seq_cst);
  }

  /// Withdraws a prepare() whose condition turned out to hold.
  void cancel() noexcept { sleepers_.fetch_sub(1, std::memory_order_seq_cst); }

  /// Sleeps until a ring() after prepare() returned `key`, or until `timeout` passes (or a signal
  /// interrupts); the caller re-checks its condition either way.
  void wait(std::uint32_t key, std::chrono::nanoseconds timeout) noexcept;

  /// Wakes every waiter; costs a fence and a load when nobody waits.
  void ring() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_relaxed) == 0) return;
    sequence_.fetch_add(1, std::memory_order_seq_cst);
    wake();
  }

 private:
  void wake() noexcept;

  std::atomic<std::uint32_t> sequence_{0};
  std::atomic<std::uint32_t> sleepers_{0};
};

static_assert(std::atomic<std::uint32_t>::is_always_lock_free && std::atomic<std::uint64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");

}  // namespace dpipe::detail::transport

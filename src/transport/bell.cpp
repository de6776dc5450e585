// The futex system calls behind Bell.

#include "bell.hpp"

#include <climits>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dpipe::detail::transport {
namespace {

/// The futex word: the sequence counter's object representation (std::atomic<uint32_t> is a plain
/// 32-bit word on Linux).
std::uint32_t* word(std::atomic<std::uint32_t>& sequence) noexcept {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return reinterpret_cast<std::uint32_t*>(&sequence);
}

}  // namespace

void Bell::wait(std::uint32_t key, std::chrono::nanoseconds timeout) noexcept {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(seconds.count());
  relative.tv_nsec = static_cast<long>((timeout - seconds).count());
  // Not FUTEX_PRIVATE: the word lives in memory shared with other processes. EAGAIN (the sequence
  // moved), ETIMEDOUT and EINTR all mean "re-check".
  syscall(SYS_futex, word(sequence_), FUTEX_WAIT, key, &relative, nullptr, 0);
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void Bell::wake() noexcept { syscall(SYS_futex, word(sequence_), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

}  // namespace dpipe::detail::transport

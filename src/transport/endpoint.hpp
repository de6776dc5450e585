#pragma once
// Endpoint: how one side of the transport (a main side, a child) blocks. It sleeps on its own bell
// and, while it waits, checks that waiting still makes sense: that its peers live, that it has not
// been told to stop, and that the configured timeout has not passed. Private to the library.

#include <chrono>
#include <string>

#include <dpipe/core/error.hpp>

#include "activity.hpp"
#include "bell.hpp"

namespace dpipe::detail::transport {

/// What makes a wait pointless. Thread-safety: used by the waiting thread.
class Liveness {
 public:
  /// Throws when waiting should stop (a peer process died: WorkerError; this process must shut
  /// down: Interrupted). `thorough` adds the checks that cost a system call; they run at least
  /// once per kLivenessPeriod of waiting.
  virtual void check(bool thorough) = 0;
  /// Hears that a wait on these peers timed out: one of them is stuck, and will not end when asked.
  virtual void timed_out() noexcept {}

 protected:
  Liveness() = default;
  Liveness(const Liveness&) = default;
  Liveness& operator=(const Liveness&) = default;
  ~Liveness() = default;
};

/// Thrown in a child process told to shut down; unwinds to its main loop, which exits.
struct Interrupted {};

/// The longest a wait goes without checking liveness: how fast a death is noticed.
inline constexpr std::chrono::milliseconds kLivenessPeriod{100};

/// What a wait does when it has lasted another stall_warning: nothing, unless the caller says.
struct NoStallWarning {
  void operator()(std::chrono::nanoseconds /*waited*/) const noexcept {}
};

struct Endpoint {
  Bell* bell = nullptr;
  Liveness* liveness = nullptr;
  std::chrono::milliseconds timeout{0};        // zero: no timeout
  ActivityBoard* self = nullptr;               // a child's own board: its waits are published there
  std::chrono::milliseconds stall_warning{0};  // zero: no warnings

  /// Blocks until `ready()` returns true, published as `waiting` on `self`. Throws what
  /// liveness->check() throws, or TimeoutError with `describe_stall()` once `timeout` passes without
  /// `ready()`; calls `warn(waited)` each time another `stall_warning` passes. The first sleep lasts
  /// at most `first_sleep`, for a caller that let its peer skip the wake-up for a while.
  template <class Ready, class Describe, class Warn = NoStallWarning>
  void wait(Ready&& ready, Describe&& describe_stall, Activity waiting,
            std::chrono::nanoseconds first_sleep = kLivenessPeriod, Warn&& warn = {}) const {
    using Clock = std::chrono::steady_clock;
    const ActivityScope published(self, waiting);
    const auto start = Clock::now();
    auto last_check = start;
    auto next_warning = start + stall_warning;
    for (bool first = true;; first = false) {
      if (ready()) return;
      const auto key = bell->prepare();
      if (ready()) {
        bell->cancel();
        return;
      }
      std::chrono::nanoseconds slice = first ? std::min<std::chrono::nanoseconds>(first_sleep, kLivenessPeriod)
                                             : std::chrono::nanoseconds(kLivenessPeriod);
      if (timeout.count() > 0) slice = std::min(slice, std::chrono::nanoseconds(start + timeout - Clock::now()));
      bell->wait(key, std::max(slice, std::chrono::nanoseconds(0)));
      const auto now = Clock::now();
      const bool thorough = now - last_check >= kLivenessPeriod;
      if (thorough) last_check = now;
      liveness->check(thorough);
      if (timeout.count() > 0 && now - start >= timeout && !ready()) {
        liveness->timed_out();
        throw TimeoutError(describe_stall());
      }
      if (stall_warning.count() > 0 && now >= next_warning) {
        warn(now - start);
        next_warning = now + stall_warning;
      }
    }
  }
};

}  // namespace dpipe::detail::transport

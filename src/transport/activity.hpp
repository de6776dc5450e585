#pragma once
// ActivityBoard: what a child process is doing, published in the memory it shares with the main
// process, so that a wait that lasts (a stall warning, a TimeoutError) can say what the silent
// child was doing and for how long. Private to the library.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace dpipe::detail::transport {

enum class Activity : std::uint32_t {
  kStarting = 0,             // forked, its pipeline not yet running
  kRunning = 1,              // running its pipeline (user functions among it)
  kWaitingForCommand = 2,    // waiting for the main process's next command (an epoch, a resume)
  kWaitingForRoom = 3,       // its queue is full: waiting for its reader to take elements
  kWaitingForDispatcher = 4  // a worker waiting for the dispatching process's next element
};

/// Thread-safety: written by the child's one thread, read by the main process at any time.
struct ActivityBoard {
  std::atomic<std::uint32_t> activity{0};
  std::atomic<std::int64_t> since{0};  // steady_clock nanoseconds (system-wide on Linux)

  /// Publishes `now_doing`, and when it began, unless it is what the child already does.
  void set(Activity now_doing) noexcept {
    if (activity.load(std::memory_order_relaxed) == static_cast<std::uint32_t>(now_doing)) return;
    since.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    activity.store(static_cast<std::uint32_t>(now_doing), std::memory_order_release);
  }
  [[nodiscard]] Activity get() const noexcept {
    return static_cast<Activity>(activity.load(std::memory_order_acquire));
  }
  /// How long the child has been doing what it does.
  [[nodiscard]] std::chrono::nanoseconds duration() const noexcept {
    return std::chrono::steady_clock::now().time_since_epoch() -
           std::chrono::nanoseconds(since.load(std::memory_order_relaxed));
  }
};

/// Sets a board to an activity for its lifetime and back to the previous one after (a child that
/// waits in the middle of running its pipeline runs it again once the wait ends). A null board is
/// left alone (the main process publishes nothing).
class ActivityScope {
 public:
  ActivityScope(ActivityBoard* board, Activity activity) noexcept
      : board_(board), previous_(board != nullptr ? board->get() : activity) {
    if (board_ != nullptr) board_->set(activity);
  }
  ~ActivityScope() {
    if (board_ != nullptr) board_->set(previous_);
  }
  ActivityScope(const ActivityScope&) = delete;
  ActivityScope& operator=(const ActivityScope&) = delete;

 private:
  ActivityBoard* board_;
  Activity previous_;
};

/// "300 ms", "31.2 s".
std::string describe_duration(std::chrono::nanoseconds duration);

}  // namespace dpipe::detail::transport

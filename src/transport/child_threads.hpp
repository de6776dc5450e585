#pragma once
// ChildThreads: a service's children running as threads of the calling process (the worker threads
// of MultiProcessingReadingService, WorkerKind::kThread): the Crew of threads. Private to the
// library.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <dpipe/tensor/host_allocator.hpp>

#include "crew.hpp"

namespace dpipe::detail::transport {

/// Thread-safety: the group's thread, but interrupt(); the children report their end themselves.
class ChildThreads final : public Crew {
 public:
  /// The threads make their tensors with `allocator` (null: the heap).
  explicit ChildThreads(HostAllocatorPtr allocator) : allocator_(std::move(allocator)) {}
  ChildThreads(const ChildThreads&) = delete;
  ChildThreads& operator=(const ChildThreads&) = delete;
  /// Joins the threads not yet joined: they must have been told to stop. After stop() returned
  /// false, the owner must keep this object alive forever instead (detached threads use it).
  ~ChildThreads() override;

  /// Starts a thread that builds the body and runs it. The body is destroyed by stop(), after
  /// every thread ended, so that what one child shares with another outlives both.
  void start(std::string name, const MakeChild& make) override;
  [[nodiscard]] std::size_t size() const noexcept override { return children_.size(); }
  [[nodiscard]] const std::string& name(std::size_t child) const override { return children_.at(child)->name; }
  [[nodiscard]] std::string who(std::size_t child) const override { return name(child); }
  [[nodiscard]] bool is_stopped(std::size_t /*child*/) const override { return false; }
  [[nodiscard]] std::vector<pid_t> pids() const override { return {}; }

  /// Throws WorkerError naming the first child that ended before it was told to stop (it could
  /// not build its body; checked when `thorough`), or UsageError after interrupt().
  void check(bool thorough) override;
  void interrupt() noexcept override { interrupted_.store(true, std::memory_order_release); }
  /// A wait on a child timed out: it is stuck, and stop() detaches it without waiting.
  void timed_out() noexcept override { timed_out_.store(true, std::memory_order_release); }

  /// Joins the threads that end within `grace`; detaches the rest (a thread stuck in a user
  /// function cannot be stopped) and keeps their bodies forever, since they still run. Returns
  /// whether every thread ended.
  bool stop(std::chrono::milliseconds grace) noexcept override;

 private:
  HostAllocatorPtr allocator_;
  struct Child {
    std::string name;
    std::thread thread;
    std::unique_ptr<ChildBody> body;  // set by the thread; read after it ended
    bool ended = false;               // guarded by mutex_
    std::string failure;              // why it ended early; guarded by mutex_
  };

  std::vector<std::unique_ptr<Child>> children_;
  std::mutex mutex_;
  std::condition_variable ended_;
  std::atomic<bool> interrupted_{false};
  std::atomic<bool> timed_out_{false};
  bool stopping_ = false;
};

}  // namespace dpipe::detail::transport

#pragma once
/// \file
/// ThreadPool: the element-type-independent half of `threadpool_map`, compiled once in the library
/// so that the node's header pulls in neither <thread> nor a queue: threads that run queued tasks.
/// The typed node (iter::ThreadPoolMapper) derives its tasks from PoolTask.

#include <cstddef>
#include <memory>

namespace dpipe::detail {

/// One piece of work for a ThreadPool.
class PoolTask {
 public:
  virtual ~PoolTask() = default;
  /// Does the work on pool thread `thread` (0 .. threads-1). Must not throw.
  virtual void run(std::size_t thread) noexcept = 0;

 private:
  friend class ThreadPool;
  bool done_ = false;  // guarded by the pool's mutex
};

/// Thread-safety: one thread (the consumer) calls every member; the pool's threads only run tasks.
class ThreadPool {
 public:
  explicit ThreadPool(std::size_t threads);
  /// Stops the threads (stop()).
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Queues `task`, which must live until wait(task) returned; starts the threads on first use.
  void submit(PoolTask& task);
  /// Blocks until `task` ran.
  void wait(PoolTask& task);
  /// Joins the threads once the queued tasks ran. REQUIRES: nothing submitted is still waited for
  /// by anyone else.
  void stop() noexcept;
  [[nodiscard]] bool running() const noexcept;

 private:
  struct Shared;
  std::unique_ptr<Shared> shared_;
};

/// The number of hardware threads (at least 1).
[[nodiscard]] std::size_t hardware_threads() noexcept;

}  // namespace dpipe::detail

// ThreadPool: the threads of threadpool_map.

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <dpipe/iter/detail/thread_pool.hpp>
#include <dpipe/tensor/host_allocator.hpp>

namespace dpipe::detail {

struct ThreadPool::Shared {
  explicit Shared(std::size_t count) : threads(count) {}

  const std::size_t threads;
  std::mutex mutex;
  std::condition_variable queued;  // a thread waits for a task (or stop)
  std::condition_variable done;    // the consumer waits for a task to finish
  std::deque<PoolTask*> queue;
  bool stop = false;
  std::vector<std::thread> workers;

  void work(std::size_t thread) {
    std::unique_lock lock(mutex);
    while (true) {
      queued.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stop, and nothing left to run
      PoolTask* task = queue.front();
      queue.pop_front();
      lock.unlock();
      task->run(thread);
      lock.lock();
      task->done_ = true;
      done.notify_all();
    }
  }
};

ThreadPool::ThreadPool(std::size_t threads) : shared_(std::make_unique<Shared>(threads)) {}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::submit(PoolTask& task) {
  Shared& shared = *shared_;
  if (shared.workers.empty()) {
    shared.stop = false;
    // The threads make their tensors with the allocator of the thread that starts them.
    for (std::size_t i = 0; i < shared.threads; ++i) {
      shared.workers.emplace_back([&shared, i, allocator = current_host_allocator()] {
        const ScopedHostAllocator scope(allocator);
        shared.work(i);
      });
    }
  }
  {
    const std::scoped_lock lock(shared.mutex);
    task.done_ = false;
    shared.queue.push_back(&task);
  }
  shared.queued.notify_one();
}

void ThreadPool::wait(PoolTask& task) {
  Shared& shared = *shared_;
  std::unique_lock lock(shared.mutex);
  shared.done.wait(lock, [&] { return task.done_; });
}

void ThreadPool::stop() noexcept {
  Shared& shared = *shared_;
  if (shared.workers.empty()) return;
  {
    const std::scoped_lock lock(shared.mutex);
    shared.stop = true;
  }
  shared.queued.notify_all();
  for (auto& worker : shared.workers) worker.join();
  shared.workers.clear();
}

bool ThreadPool::running() const noexcept { return !shared_->workers.empty(); }

std::size_t hardware_threads() noexcept { return std::max<std::size_t>(1, std::thread::hardware_concurrency()); }

}  // namespace dpipe::detail

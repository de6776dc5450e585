#pragma once
// SharedCounter: a counter in memory shared with forked worker processes (an anonymous shared
// mapping made before the fork), which a test waits on with a process-shared condition variable.

#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <new>
#include <stdexcept>

namespace dpipe::testing {

/// Thread- and process-safe: add() from any process that inherited the mapping; wait_for() from
/// any of them. Not copyable; unmapped by its owner's destructor.
class SharedCounter {
 public:
  SharedCounter() {
    void* memory = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::runtime_error("SharedCounter: mmap failed");
    shared_ = new (memory) Shared;
    pthread_mutexattr_t mutex_attributes;
    pthread_mutexattr_init(&mutex_attributes);
    pthread_mutexattr_setpshared(&mutex_attributes, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&shared_->mutex, &mutex_attributes);
    pthread_mutexattr_destroy(&mutex_attributes);
    pthread_condattr_t cond_attributes;
    pthread_condattr_init(&cond_attributes);
    pthread_condattr_setpshared(&cond_attributes, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&cond_attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&shared_->changed, &cond_attributes);
    pthread_condattr_destroy(&cond_attributes);
  }
  SharedCounter(const SharedCounter&) = delete;
  SharedCounter& operator=(const SharedCounter&) = delete;
  ~SharedCounter() { munmap(shared_, sizeof(Shared)); }

  /// Adds one and wakes the waiters.
  void add() const {
    pthread_mutex_lock(&shared_->mutex);
    ++shared_->count;
    pthread_cond_broadcast(&shared_->changed);
    pthread_mutex_unlock(&shared_->mutex);
  }

  /// Waits until the count reaches `target` or `timeout` passes; returns the count then.
  [[nodiscard]] std::uint64_t wait_for(std::uint64_t target, std::chrono::seconds timeout) const {
    timespec deadline{};
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += static_cast<time_t>(timeout.count());
    pthread_mutex_lock(&shared_->mutex);
    while (shared_->count < target) {
      if (pthread_cond_timedwait(&shared_->changed, &shared_->mutex, &deadline) == ETIMEDOUT) break;
    }
    const std::uint64_t count = shared_->count;
    pthread_mutex_unlock(&shared_->mutex);
    return count;
  }

 private:
  struct Shared {
    pthread_mutex_t mutex;
    pthread_cond_t changed;
    std::uint64_t count = 0;
  };
  Shared* shared_;
};

}  // namespace dpipe::testing

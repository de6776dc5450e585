// ChildThreads: the threading mode's children.

#include "child_threads.hpp"

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>

namespace dpipe::detail::transport {

void ChildThreads::start(std::string name, const MakeChild& make) {
  auto child = std::make_unique<Child>();
  child->name = std::move(name);
  Child* self = child.get();
  children_.push_back(std::move(child));
  self->thread = std::thread([this, self, make] {
    const ScopedHostAllocator allocator(allocator_);
    std::unique_ptr<ChildBody> body;
    std::string failure;
    try {
      body = make();
      (void)body->run();
    } catch (const std::exception& error) {
      failure = error.what();
    } catch (...) {
      failure = "an exception of an unknown type";
    }
    const std::lock_guard lock(mutex_);
    self->body = std::move(body);
    self->failure = std::move(failure);
    self->ended = true;
    ended_.notify_all();
  });
}

void ChildThreads::check(bool thorough) {
  if (interrupted_.load(std::memory_order_acquire)) {
    throw UsageError("MultiProcessingReadingService: the loader was shut down while waiting for a worker thread");
  }
  if (!thorough) return;
  const std::lock_guard lock(mutex_);
  if (stopping_) return;
  for (const auto& child : children_) {
    if (!child->ended) continue;
    const std::string how = child->failure.empty() ? std::string("ended") : "could not start: " + child->failure;
    throw WorkerError(child->name, "", how,
                      fmt::format("MultiProcessingReadingService: {} {}; the epoch cannot continue", child->name, how));
  }
}

bool ChildThreads::stop(std::chrono::milliseconds grace) noexcept {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  const auto all_ended = [&] {
    for (const auto& child : children_) {
      if (!child->ended) return false;
    }
    return true;
  };
  // After a timeout a child is stuck: the error reaches the caller now, not after a grace period.
  if (timed_out_.load(std::memory_order_acquire)) grace = std::chrono::milliseconds(0);
  const bool ended = ended_.wait_for(lock, grace, all_ended);
  lock.unlock();
  for (auto& child : children_) {
    if (!child->thread.joinable()) continue;
    lock.lock();
    const bool done = child->ended;
    lock.unlock();
    if (done) {
      child->thread.join();
    } else {
      log_warning(
          "MultiProcessingReadingService: {} did not stop (a user function may be stuck); it is left "
          "running detached, since a thread cannot be killed",
          child->name);
      child->thread.detach();
    }
  }
  if (!ended) return false;
  // Every thread ended: their bodies go, workers' first (their feeds read the dispatcher's rings).
  for (auto& child : children_) child->body.reset();
  return true;
}

ChildThreads::~ChildThreads() {
  for (auto& child : children_) {
    if (child->thread.joinable()) child->thread.join();
  }
}

}  // namespace dpipe::detail::transport

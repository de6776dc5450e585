// PrefetchEngine: the producer thread, the bounded chunk queue and the consumer's position.

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include <dpipe/iter/detail/prefetch_engine.hpp>
#include <dpipe/tensor/host_allocator.hpp>

namespace dpipe::detail {

struct PrefetchEngine::Shared {
  Shared(std::size_t buffer, std::size_t chunk, Produce make)
      : buffer_size(buffer), chunk_size(std::max<std::size_t>(1, chunk)), produce(std::move(make)) {}

  const std::size_t buffer_size;
  const std::size_t chunk_size;
  const Produce produce;
  std::mutex mutex;
  std::condition_variable room;                      // the producer waits for buffer room (or stop)
  std::condition_variable arrived;                   // the consumer waits for a chunk (or the producer's end)
  std::deque<std::unique_ptr<PrefetchChunk>> queue;  // produced, not yet taken by the consumer
  std::size_t unreleased = 0;                        // elements produced and not yet handed out
  bool stop = false;
  bool producing = false;  // the thread runs its loop
  bool ended = false;      // the producer returned a last chunk
  std::thread thread;

  // The consumer's side (its thread only).
  std::deque<std::unique_ptr<PrefetchChunk>> stash;  // taken from the queue, oldest first
  std::size_t offset = 0;                            // in stash.front()
  bool finished = false;

  /// The producer's loop: one chunk per round, as large as the buffer's room allows.
  void run() {
    std::unique_lock lock(mutex);
    while (true) {
      room.wait(lock, [&] { return stop || unreleased < buffer_size; });
      if (stop) break;
      const std::size_t max = std::min(chunk_size, buffer_size - unreleased);
      lock.unlock();
      auto chunk = produce(max);
      lock.lock();
      unreleased += chunk->count;
      const bool last = chunk->last;
      queue.push_back(std::move(chunk));
      if (last) ended = true;
      arrived.notify_one();
      if (last) break;
    }
    producing = false;
    arrived.notify_one();
  }

  void release(std::size_t count) {
    {
      const std::scoped_lock lock(mutex);
      unreleased -= std::min(count, unreleased);
    }
    room.notify_one();
  }
};

PrefetchEngine::PrefetchEngine(std::size_t buffer_size, std::size_t chunk_size, Produce produce)
    : shared_(std::make_unique<Shared>(buffer_size, chunk_size, std::move(produce))) {}

PrefetchEngine::~PrefetchEngine() { stop(); }

void PrefetchEngine::start() {
  Shared& shared = *shared_;
  if (shared.thread.joinable() || shared.ended) return;
  {
    const std::scoped_lock lock(shared.mutex);
    shared.stop = false;
    shared.producing = true;
  }
  // The thread makes its tensors with the allocator of the thread that starts it (the loader's).
  shared.thread = std::thread([&shared, allocator = current_host_allocator()] {
    const ScopedHostAllocator scope(allocator);
    shared.run();
  });
}

void PrefetchEngine::stop() noexcept {
  Shared& shared = *shared_;
  if (!shared.thread.joinable()) return;
  {
    const std::scoped_lock lock(shared.mutex);
    shared.stop = true;
  }
  shared.room.notify_one();
  shared.thread.join();
  const std::scoped_lock lock(shared.mutex);
  while (!shared.queue.empty()) {
    shared.stash.push_back(std::move(shared.queue.front()));
    shared.queue.pop_front();
  }
}

bool PrefetchEngine::running() const noexcept { return shared_->thread.joinable(); }

PrefetchChunk* PrefetchEngine::current() {
  Shared& shared = *shared_;
  while (!shared.finished) {
    if (!shared.stash.empty()) {
      PrefetchChunk& front = *shared.stash.front();
      if (shared.offset < front.count) return &front;
      // Every element of the front chunk was handed out: its end, its error, or the next chunk.
      const bool last = front.last;
      const std::exception_ptr error = front.error;
      shared.release(front.count);
      shared.stash.pop_front();
      shared.offset = 0;
      if (last) {
        shared.finished = true;
        stop();  // the producer's thread is ending: joined before the end reaches the consumer (see the header)
        if (error) std::rethrow_exception(error);
      }
      continue;
    }
    start();
    std::unique_lock lock(shared.mutex);
    shared.arrived.wait(lock, [&] { return !shared.queue.empty() || !shared.producing; });
    if (shared.queue.empty()) {
      shared.finished = true;  // nothing more will come (a restored, ended source)
      stop();
      break;
    }
    shared.stash.push_back(std::move(shared.queue.front()));
    shared.queue.pop_front();
  }
  return nullptr;
}

std::size_t PrefetchEngine::offset() const noexcept { return shared_->offset; }

std::size_t PrefetchEngine::available() const noexcept {
  const Shared& shared = *shared_;
  return shared.stash.empty() ? 0 : shared.stash.front()->count - shared.offset;
}

std::size_t PrefetchEngine::take(std::size_t count) noexcept {
  const std::size_t first = shared_->offset;
  shared_->offset += count;
  return first;
}

void PrefetchEngine::for_each_held(const std::function<void(const PrefetchChunk&, std::size_t)>& visit) const {
  const Shared& shared = *shared_;
  for (std::size_t i = 0; i < shared.stash.size(); ++i) visit(*shared.stash[i], i == 0 ? shared.offset : 0);
}

void PrefetchEngine::restart(std::unique_ptr<PrefetchChunk> restored, bool ended, bool finished) {
  Shared& shared = *shared_;
  const std::scoped_lock lock(shared.mutex);
  shared.queue.clear();
  shared.stash.clear();
  shared.offset = 0;
  shared.unreleased = restored ? restored->count : 0;
  if (restored) shared.stash.push_back(std::move(restored));
  shared.ended = ended;
  shared.finished = finished;
  shared.stop = false;
  shared.producing = false;
}

bool PrefetchEngine::finished() const noexcept { return shared_->finished; }

}  // namespace dpipe::detail

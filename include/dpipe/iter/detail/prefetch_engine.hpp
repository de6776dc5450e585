#pragma once
/// \file
/// PrefetchEngine: the element-type-independent part of `prefetch`, compiled once in the library
/// so that a prefetch node's header pulls in neither <thread> nor a queue: one producer thread, the
/// bounded queue of chunks between it and the consumer, and the consumer's position in them. The
/// typed node (iter::Prefetcher) only fills chunks and moves elements out of them.

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>

namespace dpipe::detail {

/// Elements a producer read ahead; the typed node derives from it to hold them.
struct PrefetchChunk {
  virtual ~PrefetchChunk() = default;
  /// Elements in the chunk, counted against the buffer until the consumer has handed them out.
  std::size_t count = 0;
  /// The source ended after these elements (with `error` when it failed).
  bool last = false;
  std::exception_ptr error;
};

/// Thread-safety: the consumer calls every member from one thread; the engine's thread only calls
/// the producer, which alone touches the upstream graph while the thread runs.
class PrefetchEngine {
 public:
  /// Reads up to `max` (> 0) elements into a new chunk; called on the engine's thread. It returns
  /// a chunk with `last` set (and `error` on failure) when the source ends.
  using Produce = std::function<std::unique_ptr<PrefetchChunk>(std::size_t max)>;

  /// An engine that keeps at most `buffer_size` elements read ahead and not yet handed out, read
  /// in chunks of up to `chunk_size` by `produce`.
  PrefetchEngine(std::size_t buffer_size, std::size_t chunk_size, Produce produce);
  /// Stops the thread.
  ~PrefetchEngine();
  PrefetchEngine(const PrefetchEngine&) = delete;
  PrefetchEngine& operator=(const PrefetchEngine&) = delete;

  /// Starts the thread unless it runs or the source ended.
  void start();
  /// Stops and joins the thread after its current chunk; what it read stays.
  void stop() noexcept;
  [[nodiscard]] bool running() const noexcept;

  /// The chunk whose element at position offset() is the next to hand out, starting the thread or
  /// waiting for it as needed; nullptr at the end of the stream. Rethrows the source's exception
  /// once the elements before it are handed out. The thread is joined before the end or the
  /// exception reaches the consumer: a program that forks next (a loader starting its worker
  /// processes) never forks while it exits, which under a sanitizer's runtime can leave the child
  /// holding the runtime's locks for good.
  [[nodiscard]] PrefetchChunk* current();
  /// The next element's position in current(), and how many follow it there.
  [[nodiscard]] std::size_t offset() const noexcept;
  [[nodiscard]] std::size_t available() const noexcept;
  /// Hands out `count` (<= available()) elements of current(); returns the position of the first.
  std::size_t take(std::size_t count) noexcept;

  /// Calls `visit(chunk, from)` for every chunk held, in order, from the first element not handed
  /// out. REQUIRES: the thread is stopped.
  void for_each_held(const std::function<void(const PrefetchChunk&, std::size_t)>& visit) const;
  /// Forgets everything; `restored` (may be null) holds what is handed out next; the source counts
  /// as ended when `ended`, and the stream as handed out to its end when `finished`. REQUIRES: the
  /// thread is stopped.
  void restart(std::unique_ptr<PrefetchChunk> restored, bool ended, bool finished);
  /// Whether the consumer saw the end (or the exception) of the stream.
  [[nodiscard]] bool finished() const noexcept;

 private:
  struct Shared;
  std::unique_ptr<Shared> shared_;
};

}  // namespace dpipe::detail

#pragma once
// SharedPool: the one shared-memory mapping of a service's children, holding the bells and rings
// of the main process, the workers and a dispatching child (MultiProcessingReadingService's
// layout, which a service with workers and a feeding child shares). It is an anonymous
// MAP_SHARED mapping made before forking: it has no name and no file descriptor, so nothing can
// leak, and the memory goes away with the last process that maps it. Private to the library.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "activity.hpp"
#include "bell.hpp"
#include "ring.hpp"

namespace dpipe::detail::transport {

/// What the main process shares with one child process.
struct ChildSlot {
  Bell bell;                           // the child sleeps on it
  std::atomic<std::uint32_t> stop{0};  // set by the main process at shutdown
  ActivityBoard board;                 // what the child is doing
};

struct PoolSizes {
  std::size_t workers = 0;
  bool dispatcher = false;
  std::size_t data_ring = 0;      // each worker -> main
  std::size_t dispatch_ring = 0;  // dispatcher -> each worker
  std::size_t control_ring = 0;   // main -> each child
  std::size_t reply_ring = 0;     // dispatcher -> main
};

/// Thread-safety: the mapping is shared; each bell and ring documents its own rules.
class SharedPool {
 public:
  explicit SharedPool(const PoolSizes& sizes);
  ~SharedPool();
  SharedPool(const SharedPool&) = delete;
  SharedPool& operator=(const SharedPool&) = delete;

  [[nodiscard]] Bell& main_bell() const noexcept;
  [[nodiscard]] ChildSlot& worker(std::size_t worker_id) const noexcept;
  [[nodiscard]] ChildSlot& dispatcher() const noexcept;
  [[nodiscard]] RingMemory data_ring(std::size_t worker_id) const noexcept;
  [[nodiscard]] RingMemory worker_control(std::size_t worker_id) const noexcept;
  [[nodiscard]] RingMemory dispatch_ring(std::size_t worker_id) const noexcept;
  [[nodiscard]] RingMemory dispatcher_control() const noexcept;
  [[nodiscard]] RingMemory reply_ring() const noexcept;

 private:
  [[nodiscard]] RingMemory ring(std::size_t header_offset, std::size_t data_offset, std::size_t capacity) const;

  PoolSizes sizes_;
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t slots_ = 0;         // worker slots, then the dispatcher's
  std::size_t ring_headers_ = 0;  // data, worker control, dispatch rings, dispatcher control, reply
  std::size_t data_areas_ = 0;
};

/// The power of two at least `bytes` and at least 4 KiB.
[[nodiscard]] std::size_t ring_capacity(std::size_t bytes);

}  // namespace dpipe::detail::transport

// SharedPool's layout: the main bell, one slot per child, the ring headers, then the data areas.

#include "shared_pool.hpp"

#include <bit>
#include <cerrno>
#include <cstring>
#include <new>
#include <sys/mman.h>

#include <dpipe/core/error.hpp>

namespace dpipe::detail::transport {
namespace {

constexpr std::size_t kLine = 64;

constexpr std::size_t round_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

constexpr std::size_t kHeaderStride = round_up(sizeof(RingHeader), kLine);
constexpr std::size_t kSlotStride = round_up(sizeof(ChildSlot), kLine);

// Ring numbering: data rings [0, W), worker control [W, 2W), dispatch rings [2W, 3W), then the
// dispatcher's control ring (3W) and reply ring (3W + 1).

}  // namespace

std::size_t ring_capacity(std::size_t bytes) { return std::bit_ceil(std::max<std::size_t>(bytes, 4096)); }

SharedPool::SharedPool(const PoolSizes& sizes) : sizes_(sizes) {
  if (!sizes_.dispatcher) sizes_.dispatch_ring = sizes_.reply_ring = 0;
  for (const std::size_t capacity : {sizes_.data_ring, sizes_.control_ring, sizes_.dispatch_ring, sizes_.reply_ring}) {
    if (capacity != 0 && (!std::has_single_bit(capacity) || capacity < 4096)) {
      DPIPE_THROW(InvalidArgument, "dpipe internal error: ring capacity {} is not a power of two >= 4096", capacity);
    }
  }
  const std::size_t workers = sizes_.workers;
  const std::size_t dispatch = sizes_.dispatcher ? 1 : 0;
  slots_ = kLine;
  ring_headers_ = slots_ + (workers + 1) * kSlotStride;
  data_areas_ = round_up(ring_headers_ + (3 * workers + 2) * kHeaderStride, 4096);
  bytes_ = data_areas_ + workers * (sizes_.data_ring + sizes_.control_ring + sizes_.dispatch_ring) +
           dispatch * (sizes_.control_ring + sizes_.reply_ring);
  void* memory = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    DPIPE_THROW(Error, "MultiProcessingReadingService: cannot map {} bytes of shared memory: {}", bytes_,
                std::strerror(errno));
  }
  base_ = static_cast<std::byte*>(memory);
  new (base_) Bell();
  for (std::size_t i = 0; i <= workers; ++i) new (base_ + slots_ + i * kSlotStride) ChildSlot();
  for (std::size_t i = 0; i < 3 * workers + 2; ++i) new (base_ + ring_headers_ + i * kHeaderStride) RingHeader();
}

SharedPool::~SharedPool() { munmap(base_, bytes_); }

Bell& SharedPool::main_bell() const noexcept { return *std::launder(reinterpret_cast<Bell*>(base_)); }

ChildSlot& SharedPool::worker(std::size_t worker_id) const noexcept {
  return *std::launder(reinterpret_cast<ChildSlot*>(base_ + slots_ + worker_id * kSlotStride));
}

ChildSlot& SharedPool::dispatcher() const noexcept { return worker(sizes_.workers); }

RingMemory SharedPool::ring(std::size_t header_index, std::size_t data_offset, std::size_t capacity) const {
  return RingMemory{std::launder(reinterpret_cast<RingHeader*>(base_ + ring_headers_ + header_index * kHeaderStride)),
                    base_ + data_areas_ + data_offset, capacity};
}

RingMemory SharedPool::data_ring(std::size_t worker_id) const noexcept {
  return ring(worker_id, worker_id * sizes_.data_ring, sizes_.data_ring);
}

RingMemory SharedPool::worker_control(std::size_t worker_id) const noexcept {
  const std::size_t w = sizes_.workers;
  return ring(w + worker_id, w * sizes_.data_ring + worker_id * sizes_.control_ring, sizes_.control_ring);
}

RingMemory SharedPool::dispatch_ring(std::size_t worker_id) const noexcept {
  const std::size_t w = sizes_.workers;
  return ring(2 * w + worker_id, w * (sizes_.data_ring + sizes_.control_ring) + worker_id * sizes_.dispatch_ring,
              sizes_.dispatch_ring);
}

RingMemory SharedPool::dispatcher_control() const noexcept {
  const std::size_t w = sizes_.workers;
  return ring(3 * w, w * (sizes_.data_ring + sizes_.control_ring + sizes_.dispatch_ring), sizes_.control_ring);
}

RingMemory SharedPool::reply_ring() const noexcept {
  const std::size_t w = sizes_.workers;
  return ring(3 * w + 1, w * (sizes_.data_ring + sizes_.control_ring + sizes_.dispatch_ring) + sizes_.control_ring,
              sizes_.reply_ring);
}

}  // namespace dpipe::detail::transport

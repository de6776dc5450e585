#pragma once
/// \file
/// HostAllocator: where tensor buffers (dpipe::Tensor, tensor_collate's batches) come from.
///
/// - heap_allocator(): the default, aligned heap memory through a recycling pool, so that a
///   buffer the trainer drops is handed to the next batch with its pages already mapped.
/// - cuda_host_allocator(): page-locked ("pinned") memory from the CUDA runtime, which dpipe loads
///   with dlopen when it is first asked for; no build dependency on CUDA.
/// - your own: derive from HostAllocator (an arena, a framework's caching allocator, a counter).
///
/// Which allocator a tensor uses: the one its maker is given (tensor_collate's `allocator`), else
/// the calling thread's current_host_allocator(). A DataLoader2 sets the current one while its
/// pipeline runs in the trainer's thread and in worker threads (MultiProcessingOptions::pin_memory
/// and ::host_allocator); worker processes their tensor arena (MultiProcessingOptions::
/// tensor_arena_bytes), whose tensors reach the trainer without a copy, or else the heap.

#include <cstddef>
#include <memory>
#include <string>

namespace dpipe {

/// Alignment of every tensor buffer dpipe allocates (a cache line, and what SIMD loads want).
inline constexpr std::size_t kTensorAlignment = 64;

/// A source of host memory for tensors. Thread-safety: allocate() and deallocate() may be called
/// from any thread at once (a worker thread allocates, the trainer frees).
class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  /// `bytes` (> 0) aligned to kTensorAlignment. Throws on failure; never returns null.
  [[nodiscard]] virtual void* allocate(std::size_t bytes) = 0;
  /// Gives back a block allocate(bytes) returned, with the same `bytes`.
  virtual void deallocate(void* data, std::size_t bytes) noexcept = 0;
  /// Whether the memory is page-locked for device copies.
  [[nodiscard]] virtual bool pinned() const noexcept { return false; }
  /// "heap", "cuda-host", ...: for messages.
  [[nodiscard]] virtual std::string name() const = 0;

 protected:
  HostAllocator() = default;
  HostAllocator(const HostAllocator&) = default;
  HostAllocator& operator=(const HostAllocator&) = default;
};

using HostAllocatorPtr = std::shared_ptr<HostAllocator>;

/// The process's heap allocator: aligned operator new, behind a recycling pool that keeps up to
/// 512 MiB of freed blocks for reuse. Never null.
[[nodiscard]] HostAllocatorPtr heap_allocator();

/// A pool in front of `upstream`: deallocate() keeps the block (up to `max_cached_bytes` in all) and
/// allocate() of a size of the same class (sizes rounded up by at most 1/8) reuses it. Blocks it
/// keeps go back to `upstream` when the pool is destroyed. Safe across fork: the pool's lock is
/// taken around fork(), so a child never inherits it held.
[[nodiscard]] HostAllocatorPtr recycling_allocator(HostAllocatorPtr upstream, std::size_t max_cached_bytes);

/// Page-locked memory from the CUDA runtime (cudaHostAlloc / cudaFreeHost) behind a recycling
/// pool of 512 MiB, so that pinning costs once per buffer size, not per batch. A freed buffer may
/// be reused at once: an asynchronous device copy from it must have finished before the last
/// tensor referring to it goes (dpipe cannot see the CUDA streams that read it).
///
/// The runtime is `library` when not empty, else the environment's DPIPE_CUDA_RUNTIME, else the
/// first of libcudart.so, libcudart.so.13, .12 and .11.0 that dlopen finds. The allocator pins and
/// frees one block to check the runtime works. Throws NotSupportedError when no runtime loads, it
/// lacks the functions, or it cannot pin (no driver, no device): the message says which, and the
/// runtime's own words. Called with an empty `library`, it returns the same process-wide allocator
/// every time once one works.
[[nodiscard]] HostAllocatorPtr cuda_host_allocator(const std::string& library = {});

/// This thread's allocator for new tensors: the one a ScopedHostAllocator set, else heap_allocator().
[[nodiscard]] const HostAllocatorPtr& current_host_allocator();

/// Makes `allocator` the calling thread's current_host_allocator() until destroyed (scopes nest).
/// A null `allocator` leaves the current one as it is. Thread-safety: per thread.
class ScopedHostAllocator {
 public:
  explicit ScopedHostAllocator(HostAllocatorPtr allocator);
  ~ScopedHostAllocator();
  ScopedHostAllocator(const ScopedHostAllocator&) = delete;
  ScopedHostAllocator& operator=(const ScopedHostAllocator&) = delete;

 private:
  HostAllocatorPtr allocator_;
  const HostAllocatorPtr* previous_ = nullptr;
};

}  // namespace dpipe

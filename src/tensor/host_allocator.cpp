// The heap allocator, the recycling pool in front of any allocator, and the calling thread's current
// allocator.

#include <mutex>
#include <new>
#include <pthread.h>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/tensor/host_allocator.hpp>

#include "tensor/size_class.hpp"

namespace dpipe {

namespace {

constexpr std::size_t kDefaultCachedBytes = std::size_t{512} << 20;

/// Aligned operator new and delete.
class AlignedHeap final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override { return ::operator new (bytes, std::align_val_t{kTensorAlignment}); }
  void deallocate(void* data, std::size_t bytes) noexcept override {
    ::operator delete (data, bytes, std::align_val_t{kTensorAlignment});
  }
  [[nodiscard]] std::string name() const override { return "heap"; }
};

class RecyclingPool;

/// Every live pool, so that fork() can take their locks first (a child must not inherit a lock a
/// thread of the parent held). Never destroyed: pools may outlive static destruction.
struct PoolRegistry {
  std::mutex mutex;
  std::set<RecyclingPool*> pools;
};

PoolRegistry& registry() {
  static auto* const instance = new PoolRegistry;
  return *instance;
}

class RecyclingPool final : public HostAllocator {
 public:
  RecyclingPool(HostAllocatorPtr upstream, std::size_t max_cached_bytes)
      : upstream_(std::move(upstream)), max_cached_bytes_(max_cached_bytes) {
    static std::once_flag registered;
    std::call_once(registered, [] {
      pthread_atfork(
          [] {
            registry().mutex.lock();
            for (auto* pool : registry().pools) pool->mutex_.lock();
          },
          unlock_all, unlock_all);
    });
    const std::lock_guard lock(registry().mutex);
    registry().pools.insert(this);
  }

  ~RecyclingPool() override {
    {
      const std::lock_guard lock(registry().mutex);
      registry().pools.erase(this);
    }
    for (auto& [size, blocks] : free_) {
      for (void* block : blocks) upstream_->deallocate(block, size);
    }
  }
  RecyclingPool(const RecyclingPool&) = delete;
  RecyclingPool& operator=(const RecyclingPool&) = delete;

  void* allocate(std::size_t bytes) override {
    const std::size_t size = detail::size_class(bytes);
    {
      const std::lock_guard lock(mutex_);
      if (const auto found = free_.find(size); found != free_.end() && !found->second.empty()) {
        void* block = found->second.back();
        found->second.pop_back();
        cached_bytes_ -= size;
        return block;
      }
    }
    return upstream_->allocate(size);
  }

  void deallocate(void* data, std::size_t bytes) noexcept override {
    const std::size_t size = detail::size_class(bytes);
    {
      const std::lock_guard lock(mutex_);
      if (cached_bytes_ + size <= max_cached_bytes_) {
        try {
          free_[size].push_back(data);
          cached_bytes_ += size;
          return;
        } catch (const std::bad_alloc&) {
          // No room to remember the block: give it back instead.
        }
      }
    }
    upstream_->deallocate(data, size);
  }

  [[nodiscard]] bool pinned() const noexcept override { return upstream_->pinned(); }
  [[nodiscard]] std::string name() const override { return upstream_->name(); }

 private:
  static void unlock_all() {
    for (auto* pool : registry().pools) pool->mutex_.unlock();
    registry().mutex.unlock();
  }

  HostAllocatorPtr upstream_;
  std::size_t max_cached_bytes_;
  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;  // size class -> blocks, last freed last
  std::size_t cached_bytes_ = 0;
};

const HostAllocatorPtr& heap() {
  static const auto* const instance =
      new HostAllocatorPtr(recycling_allocator(std::make_shared<AlignedHeap>(), kDefaultCachedBytes));
  return *instance;
}

thread_local const HostAllocatorPtr* current_allocator = nullptr;

}  // namespace

HostAllocatorPtr heap_allocator() { return heap(); }

HostAllocatorPtr recycling_allocator(HostAllocatorPtr upstream, std::size_t max_cached_bytes) {
  if (upstream == nullptr) DPIPE_THROW(InvalidArgument, "recycling_allocator: the upstream allocator is null");
  return std::make_shared<RecyclingPool>(std::move(upstream), max_cached_bytes);
}

const HostAllocatorPtr& current_host_allocator() { return current_allocator != nullptr ? *current_allocator : heap(); }

ScopedHostAllocator::ScopedHostAllocator(HostAllocatorPtr allocator)
    : allocator_(std::move(allocator)), previous_(current_allocator) {
  if (allocator_ != nullptr) current_allocator = &allocator_;
}

ScopedHostAllocator::~ScopedHostAllocator() { current_allocator = previous_; }

}  // namespace dpipe

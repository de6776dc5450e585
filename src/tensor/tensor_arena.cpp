// TensorArena: blocks in shared memory with a count of holders each, carved by the worker process.

#include "tensor/tensor_arena.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <sys/mman.h>
#include <unistd.h>
#include <unordered_map>
#include <utility>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/tensor/tensor.hpp>

#include "tensor/size_class.hpp"

namespace dpipe::detail {
namespace {

/// The most blocks of one size a worker remembers having let go of, to reuse them first.
constexpr std::size_t kMaxFreed = 4096;
constexpr std::uint64_t kBlockMagic = 0x6b6f6c4274706464;  // "ddptBlok"

/// What precedes each block's data, in the shared memory.
struct alignas(kTensorAlignment) BlockHeader {
  std::uint64_t magic = kBlockMagic;
  std::uint64_t capacity = 0;             // the data's bytes (a size class)
  std::atomic<std::uint32_t> holders{0};  // tensors and references using the block
};
static_assert(sizeof(BlockHeader) == kTensorAlignment);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "block counts are shared between processes");

/// The arenas this process maps, by id. Never destroyed: tensors may outlive static destruction.
struct ArenaRegistry {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::weak_ptr<TensorArena>> arenas;
};

ArenaRegistry& registry() {
  static auto* const instance = new ArenaRegistry;
  return *instance;
}

thread_local TensorHandoverScope* current_scope = nullptr;

/// 64 random bits: a reference from another run or process names no arena of this one.
std::uint64_t random_id() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

}  // namespace

/// The worker's allocator (`carves`: blocks of the arena) and the main process's (the allocator of
/// adopted storages, whose own allocate() uses the heap: only the worker may carve). Both give a
/// block's count back when its tensor goes.
class TensorArena::Carver final : public HostAllocator {
 public:
  Carver(std::shared_ptr<TensorArena> arena, bool carves)
      : arena_(std::move(arena)), carves_(carves), owner_(getpid()) {}

  void* allocate(std::size_t bytes) override {
    if (carves_ && bytes >= kMinArenaTensorBytes) {
      if (void* data = take_block(size_class(bytes))) return data;
    }
    return heap_allocator()->allocate(bytes);
  }

  void deallocate(void* data, std::size_t bytes) noexcept override {
    if (!arena_->contains(data)) return heap_allocator()->deallocate(data, bytes);
    // Release: this holder's reads of the block happen before the worker, which acquires the count
    // at 0, writes it again (acquire: so do the other holders' when this is the worker's last).
    // A process forked since (its copy of a tensor destroyed there) holds no count of its own.
    if (getpid() != owner_) return;
    BlockHeader* block = header(data);
    if (!carves_) {
      block->holders.fetch_sub(1, std::memory_order_release);
      return;
    }
    // In the worker, under the lock: no other thread carves the arena afresh in between.
    const std::lock_guard lock(mutex_);
    if (block->holders.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // The worker let go of the last hold: the block is still in its caches, so it serves first.
    auto& freed = freed_[block->capacity];
    if (freed.size() < kMaxFreed) {
      freed.push_back(static_cast<std::uint64_t>(static_cast<std::byte*>(data) - arena_->base_));
    }
  }

  [[nodiscard]] std::string name() const override { return "tensor arena of " + arena_->name_; }

  [[nodiscard]] static BlockHeader* header(const void* data) noexcept {
    return static_cast<BlockHeader*>(const_cast<void*>(data)) - 1;
  }

 private:
  /// A block of `capacity` nobody holds, or a new one, held once; null when the arena is full.
  void* take_block(std::size_t capacity) {
    if (capacity > arena_->bytes_ - sizeof(BlockHeader)) return nullptr;  // never fits
    const std::lock_guard lock(mutex_);
    for (auto& freed = freed_[capacity]; !freed.empty();) {
      const std::uint64_t offset = freed.back();
      freed.pop_back();
      if (void* data = take_if_free(offset)) return data;  // else the scan below took it meanwhile
    }
    for (const std::uint64_t offset : blocks_[capacity]) {
      if (void* data = take_if_free(offset)) return data;
    }
    if (!has_room(capacity) && all_free()) {
      // Another mix of sizes than the arena was carved for: start over.
      blocks_.clear();
      freed_.clear();
      carved_ = 0;
    }
    if (!has_room(capacity)) return nullptr;
    auto* block = new (arena_->base_ + carved_) BlockHeader;
    block->capacity = capacity;
    block->holders.store(1, std::memory_order_relaxed);
    const std::uint64_t offset = carved_ + sizeof(BlockHeader);
    carved_ = offset + capacity;
    blocks_[capacity].push_back(offset);
    return arena_->base_ + offset;
  }

  /// The block at `offset`, held once, if nobody holds it; else null.
  void* take_if_free(std::uint64_t offset) noexcept {
    BlockHeader* block = header(arena_->base_ + offset);
    // Only this process raises a count from 0: nobody can take the block between the two.
    if (block->holders.load(std::memory_order_acquire) != 0) return nullptr;
    block->holders.store(1, std::memory_order_relaxed);
    return arena_->base_ + offset;
  }

  [[nodiscard]] bool has_room(std::size_t capacity) const noexcept {
    return capacity <= arena_->bytes_ - carved_ && arena_->bytes_ - carved_ - capacity >= sizeof(BlockHeader);
  }

  [[nodiscard]] bool all_free() const noexcept {
    for (const auto& [capacity, offsets] : blocks_) {
      for (const std::uint64_t offset : offsets) {
        if (header(arena_->base_ + offset)->holders.load(std::memory_order_acquire) != 0) return false;
      }
    }
    return true;
  }

  std::shared_ptr<TensorArena> arena_;
  bool carves_;
  pid_t owner_;  // the process whose tensors hold counts
  std::mutex mutex_;
  std::uint64_t carved_ = 0;                                              // the arena's bytes in blocks
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> blocks_;  // capacity -> data offsets
  // Capacity -> the offsets of blocks this process let go of, the last one last (a block may be
  // there twice, or taken meanwhile: take_if_free() decides).
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> freed_;
};

std::shared_ptr<TensorArena> TensorArena::create(std::size_t bytes, const std::string& name) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > std::numeric_limits<std::size_t>::max() - page) {
    DPIPE_THROW(InvalidArgument, "MultiProcessingReadingService: a tensor arena of {} bytes for {} is too large", bytes,
                name);
  }
  const std::size_t mapped = (bytes + page - 1) / page * page;
  void* base =
      mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);  // NOLINT
  if (base == MAP_FAILED) {
    DPIPE_THROW(Error, "MultiProcessingReadingService: cannot map a tensor arena of {} bytes for {}: {}", mapped, name,
                std::strerror(errno));
  }
  std::shared_ptr<TensorArena> arena(new TensorArena(static_cast<std::byte*>(base), mapped, name));
  const std::lock_guard lock(registry().mutex);
  registry().arenas[arena->id_] = arena;
  return arena;
}

TensorArena::TensorArena(std::byte* base, std::size_t bytes, std::string name)
    : base_(base), bytes_(bytes), id_(random_id()), name_(std::move(name)) {}

TensorArena::~TensorArena() {
  {
    const std::lock_guard lock(registry().mutex);
    registry().arenas.erase(id_);
  }
  munmap(base_, bytes_);
}

bool TensorArena::contains(const void* data) const noexcept {
  const auto* byte = static_cast<const std::byte*>(data);
  return byte >= base_ && byte < base_ + bytes_;
}

bool TensorArena::starts_block(const void* data) const noexcept {
  if (!contains(data)) return false;
  const auto offset = static_cast<std::size_t>(static_cast<const std::byte*>(data) - base_);
  return offset >= sizeof(BlockHeader) && offset % kTensorAlignment == 0 && Carver::header(data)->magic == kBlockMagic;
}

HostAllocatorPtr TensorArena::allocator() { return std::make_shared<Carver>(shared_from_this(), true); }

std::uint64_t TensorArena::hand_over(const void* data) noexcept {
  Carver::header(data)->holders.fetch_add(1, std::memory_order_relaxed);
  return static_cast<std::uint64_t>(static_cast<const std::byte*>(data) - base_);
}

void TensorArena::take_back(std::uint64_t offset) noexcept {
  Carver::header(base_ + offset)->holders.fetch_sub(1, std::memory_order_release);
}

std::shared_ptr<TensorStorage> TensorArena::adopt(std::uint64_t offset, std::size_t bytes) {
  const bool placed = offset >= sizeof(BlockHeader) && offset % kTensorAlignment == 0 && offset <= bytes_;
  const BlockHeader* block = placed ? Carver::header(base_ + offset) : nullptr;
  if (block == nullptr || block->magic != kBlockMagic || block->capacity < bytes || block->capacity > bytes_ - offset ||
      block->holders.load(std::memory_order_acquire) == 0) {
    DPIPE_THROW(SerializationError, "corrupt input: no block of {} bytes held at offset {} of the tensor arena of {}",
                bytes, offset, name_);
  }
  return std::make_shared<TensorStorage>(std::make_shared<Carver>(shared_from_this(), false), base_ + offset, bytes);
}

std::shared_ptr<TensorArena> find_tensor_arena(std::uint64_t id) {
  const std::lock_guard lock(registry().mutex);
  const auto found = registry().arenas.find(id);
  return found != registry().arenas.end() ? found->second.lock() : nullptr;
}

TensorHandoverScope::~TensorHandoverScope() { abandon(); }

void TensorHandoverScope::begin_element() noexcept {
  abandon();
  previous_ = current_scope;
  current_scope = this;
  active_ = true;
}

std::uint64_t TensorHandoverScope::end_element() noexcept {
  const std::uint64_t bytes = std::exchange(referenced_bytes_, 0);
  handed_over_.clear();
  abandon();
  return bytes;
}

void TensorHandoverScope::abandon() noexcept {
  for (const std::uint64_t offset : handed_over_) arena_->take_back(offset);
  handed_over_.clear();
  referenced_bytes_ = 0;
  if (!active_) return;
  current_scope = previous_;
  active_ = false;
}

TensorHandoverScope* TensorHandoverScope::current() noexcept { return current_scope; }

std::uint64_t TensorHandoverScope::hand_over(const void* data, std::uint64_t bytes) {
  handed_over_.reserve(handed_over_.size() + 1);  // may throw: before the count is taken
  const std::uint64_t offset = arena_->hand_over(data);
  handed_over_.push_back(offset);
  referenced_bytes_ += bytes;
  return offset;
}

}  // namespace dpipe::detail

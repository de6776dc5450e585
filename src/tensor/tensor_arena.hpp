#pragma once
// TensorArena: a worker process's shared tensor memory, through which its tensors reach the main
// process without a copy. Private to the library.
//
// The main process maps the arena (shared, anonymous memory) before it forks the worker, so the
// arena lies at the same address in both. The worker makes its tensors of kMinArenaTensorBytes
// and more in it (the allocator()). While a TensorHandoverScope is alive on the worker's encoding
// thread, Serializer<Tensor> writes such a tensor as a reference to its block instead of its
// bytes, and the main process's decoder adopts the block. Each block carries a count of its
// holders in the shared memory: the worker's tensor, and one per reference sent; the main
// process's tensor gives its count back when it goes, and the worker reuses a block whose count
// is 0. When the arena has no room, tensors come from the heap and cross by copy, as without one.
//
// A reference owns one count until it is decoded: a record holding one must be decoded exactly
// once, or its block stays taken (the transport decodes the records it drops, and turns those it
// stores for a checkpoint into plain encodings, see StreamLink::arena_elements).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <dpipe/tensor/host_allocator.hpp>

namespace dpipe {
class TensorStorage;
}  // namespace dpipe

namespace dpipe::detail {

/// Tensors smaller than this are made on the heap: their copy costs less than a block's upkeep.
inline constexpr std::size_t kMinArenaTensorBytes = std::size_t{64} << 10;

/// Thread-safety: allocator() is for the worker process, whose threads may allocate at once;
/// hand_over() for its encoding thread; adopt() and the blocks' release for any thread of any
/// process mapping the arena.
class TensorArena final : public std::enable_shared_from_this<TensorArena> {
 public:
  /// Maps `bytes` (rounded up to whole pages) of shared memory, which pages in when first used,
  /// and registers the arena with this process (find_tensor_arena()). `name` is for messages
  /// ("worker process 0"). Throws Error when the kernel refuses the mapping.
  [[nodiscard]] static std::shared_ptr<TensorArena> create(std::size_t bytes, const std::string& name);
  ~TensorArena();
  TensorArena(const TensorArena&) = delete;
  TensorArena& operator=(const TensorArena&) = delete;

  /// Random (64 bits): another run's or process's arena has another.
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  /// Whether `data` lies in the arena.
  [[nodiscard]] bool contains(const void* data) const noexcept;
  /// Whether `data` is the start of one of the arena's blocks (what hand_over() takes).
  [[nodiscard]] bool starts_block(const void* data) const noexcept;

  /// The worker process's allocator: blocks of the arena for kMinArenaTensorBytes and more, reused
  /// once their holders are gone; the heap for smaller tensors and when the arena is full. Call it
  /// in the worker, once: it carves the arena, which only one process may do.
  [[nodiscard]] HostAllocatorPtr allocator();

  /// Counts a holder more for the block whose data starts at `data` (starts_block()); returns
  /// the block's offset, which adopt() takes.
  [[nodiscard]] std::uint64_t hand_over(const void* data) noexcept;
  /// Takes back the count hand_over() added for the block at `offset` (a reference never sent).
  void take_back(std::uint64_t offset) noexcept;
  /// The storage of `bytes` of the block at `offset`, owning the count a hand_over() added.
  /// Throws SerializationError when no block of at least `bytes` with a holder starts there.
  [[nodiscard]] std::shared_ptr<TensorStorage> adopt(std::uint64_t offset, std::size_t bytes);

 private:
  class Carver;
  TensorArena(std::byte* base, std::size_t bytes, std::string name);

  std::byte* base_;
  std::size_t bytes_;
  std::uint64_t id_;
  std::string name_;
};

/// The arena of this process with `id`, or null when none is mapped (the worker that made the
/// reference is gone with its loader, or the bytes came from another process's checkpoint).
[[nodiscard]] std::shared_ptr<TensorArena> find_tensor_arena(std::uint64_t id);

/// A worker's encoding of its output elements into records: between begin_element() and
/// end_element(), Serializer<Tensor>::write on this thread writes the tensors that lie in `arena`
/// as references (hand_over()); nothing else the thread encodes (the user's own to_bytes in a
/// map) does. An element that does not end (its encoding threw) gives its counts back.
/// Thread-safety: per thread.
class TensorHandoverScope {
 public:
  explicit TensorHandoverScope(TensorArena& arena) noexcept : arena_(&arena) {}
  /// Gives back the counts of an element begun and not ended.
  ~TensorHandoverScope();
  TensorHandoverScope(const TensorHandoverScope&) = delete;
  TensorHandoverScope& operator=(const TensorHandoverScope&) = delete;

  /// Starts an element: this becomes the thread's current() scope.
  void begin_element() noexcept;
  /// The element's record is complete: its references are the reader's now. Returns the bytes
  /// they refer to.
  std::uint64_t end_element() noexcept;

  /// The scope of the element this thread encodes now, or null.
  [[nodiscard]] static TensorHandoverScope* current() noexcept;
  [[nodiscard]] TensorArena& arena() const noexcept { return *arena_; }
  /// The bytes the current element's references refer to.
  [[nodiscard]] std::uint64_t referenced_bytes() const noexcept { return referenced_bytes_; }
  /// A reference to the block of `bytes` at `data` (TensorArena::hand_over()), counted for the
  /// element; returns the block's offset.
  [[nodiscard]] std::uint64_t hand_over(const void* data, std::uint64_t bytes);

 private:
  /// Gives back the counts of the current element and stops being current.
  void abandon() noexcept;

  TensorArena* arena_;
  TensorHandoverScope* previous_ = nullptr;
  bool active_ = false;
  std::vector<std::uint64_t> handed_over_;  // the current element's block offsets
  std::uint64_t referenced_bytes_ = 0;
};

}  // namespace dpipe::detail

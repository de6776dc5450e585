#pragma once
/// \file
/// ShuffleState: the element-type-independent half of `shuffle` (iter::Shuffler<T>), its
/// generator and its drain, with the checkpoint code compiled once in the library.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/iter/detail/drain_order.hpp>
#include <dpipe/random/python_random.hpp>

namespace dpipe::detail {

/// torchdata's shuffle buffer algorithm without the buffer: which position of a buffer of n
/// elements an incoming element replaces, and in which order the buffer drains once the source
/// ended. Thread-safety: none.
class ShuffleState {
 public:
  /// Throws InvalidArgument when buffer_size is 0.
  explicit ShuffleState(std::size_t buffer_size);
  ShuffleState(const ShuffleState& other);
  ShuffleState& operator=(const ShuffleState&) = delete;
  ~ShuffleState();

  [[nodiscard]] std::size_t buffer_size() const noexcept { return buffer_size_; }
  [[nodiscard]] bool enabled() const noexcept { return enabled_; }
  void set_enabled(bool enabled) noexcept { enabled_ = enabled; }
  [[nodiscard]] std::optional<std::uint64_t> pending_seed() const noexcept { return pending_seed_; }
  void set_seed(std::uint64_t seed) noexcept { pending_seed_ = seed; }
  /// Whether the source ended and the buffer drains.
  [[nodiscard]] bool draining() const noexcept { return draining_; }

  /// A new iteration: nothing drains; when enabled, the generator takes the pending seed (or one
  /// from the OS entropy source).
  void reset();

  /// The source ended with `buffered` elements in the buffer.
  void start_draining(std::size_t buffered);

  /// The position of a full buffer of `buffered` elements that an incoming element replaces.
  std::size_t exchange_position(std::size_t buffered) {
    return static_cast<std::size_t>(rng_.randint(0, static_cast<std::int64_t>(buffered) - 1));
  }

  /// torchdata's `buffer.pop(randint(0, len - 1))`: the buffer position to hand out next while
  /// draining, or nothing when the buffer is drained.
  std::optional<std::size_t> drain_position() {
    if (drain_.remaining() == 0) return std::nullopt;
    return drain_.take(static_cast<std::size_t>(rng_.randint(0, static_cast<std::int64_t>(drain_.remaining()) - 1)));
  }

  /// Writes the flags and the generator to `writer`; returns the buffer positions (of `buffered`)
  /// still to hand out, in buffer order, which the node writes as its buffer.
  std::vector<std::size_t> save_state(StateWriter& writer, std::size_t buffered) const;
  /// Reads what save_state() wrote, except the buffer.
  void load_state(const StateReader& reader);
  /// After load_state(), with the node's restored buffer of `buffered` elements: StateError (naming
  /// `node`) when it exceeds buffer_size; starts its drain if the saved node was draining.
  void loaded_buffer(std::size_t buffered, const DataPipe& node);

 private:
  std::size_t buffer_size_;
  bool enabled_ = true;
  std::optional<std::uint64_t> pending_seed_;
  PythonRandom rng_;
  bool draining_ = false;  // the source ended: the buffer is being drained
  DrainOrder drain_;       // while draining, which buffer positions are left
};

}  // namespace dpipe::detail

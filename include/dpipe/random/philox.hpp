#pragma once
/// \file
/// PhiloxEngine: torchdata's random/_philox.py, bit for bit. Philox4x32-10 (Random123) in counter
/// mode; each counter block yields two uint64 values, and block 0 of a seed is reserved to derive
/// the seeds of spawned engines.

#include <array>
#include <cstdint>
#include <optional>

#include <dpipe/serialization/serializer.hpp>

namespace dpipe {

/// A counter-based generator of uint64 values. Thread-safety: none; copies are independent.
class PhiloxEngine {
 public:
  using Block = std::array<std::uint32_t, 4>;
  using Key = std::array<std::uint32_t, 2>;

  /// An unseeded engine; generate() and spawn() throw UsageError until seed() is called.
  PhiloxEngine() = default;
  explicit PhiloxEngine(std::uint64_t seed) { this->seed(seed); }

  /// Restarts the engine at `seed`.
  void seed(std::uint64_t seed);
  /// The next uint64 of the stream.
  std::uint64_t generate();
  /// A new engine whose seed depends only on this engine's seed and `index` (not on how much of
  /// the stream has been used).
  [[nodiscard]] PhiloxEngine spawn(std::uint64_t index) const;

  /// The Philox4x32-10 block function.
  [[nodiscard]] static Block philox(Key key, Block counter) noexcept;

  [[nodiscard]] bool seeded() const noexcept { return seeded_; }
  [[nodiscard]] Key key() const noexcept { return key_; }
  [[nodiscard]] Key spawn_key() const noexcept { return spawn_key_; }

  friend bool operator==(const PhiloxEngine&, const PhiloxEngine&) = default;

  DPIPE_FIELDS(key_, counter_, cache_, spawn_key_, seeded_)

 private:
  void require_seeded() const;
  void increment_counter() noexcept;

  Key key_{};
  Block counter_{};
  std::optional<Block> cache_;
  Key spawn_key_{};
  bool seeded_ = false;
};

}  // namespace dpipe

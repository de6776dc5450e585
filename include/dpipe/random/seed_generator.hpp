#pragma once
/// \file
/// SeedGenerator: torchdata's random/seed_generator.py. Two Philox engines: the shared stream
/// (identical in every worker and rank: seeds random nodes upstream of a sharding point) and the
/// worker stream (unique per worker and rank after spawn: seeds the nodes downstream).

#include <cstdint>
#include <optional>

#include <dpipe/random/philox.hpp>

namespace dpipe {

/// Thread-safety: none; copies are independent.
class SeedGenerator {
 public:
  /// Seeds both streams with `seed`, or with a value from the OS entropy source when absent.
  explicit SeedGenerator(std::optional<std::uint64_t> seed = std::nullopt) { this->seed(seed); }

  /// Reseeds both streams with the same value (from the OS entropy source when absent).
  void seed(std::optional<std::uint64_t> seed = std::nullopt);
  /// The next value of the shared stream.
  std::uint64_t generate_shared_seed() { return shared_.generate(); }
  /// The next value of the worker stream.
  std::uint64_t generate_seed() { return worker_.generate(); }
  /// A generator for worker `worker_id`: the shared stream continues from this one's current
  /// position and the worker stream is this worker stream's spawn(worker_id). With `inplace`, this
  /// generator becomes that generator and is returned.
  SeedGenerator spawn(std::uint64_t worker_id, bool inplace = false);

  [[nodiscard]] const PhiloxEngine& shared_engine() const noexcept { return shared_; }
  [[nodiscard]] const PhiloxEngine& worker_engine() const noexcept { return worker_; }

  friend bool operator==(const SeedGenerator&, const SeedGenerator&) = default;

  DPIPE_FIELDS(shared_, worker_)

 private:
  SeedGenerator(PhiloxEngine shared, PhiloxEngine worker) : shared_(std::move(shared)), worker_(std::move(worker)) {}

  PhiloxEngine shared_;
  PhiloxEngine worker_;
};

/// A uint64 from the OS entropy source (std::random_device). Thread-safe.
std::uint64_t entropy_seed();

}  // namespace dpipe

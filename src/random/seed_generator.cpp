// SeedGenerator: seeding both streams, spawning, and the OS entropy source.

#include <mutex>
#include <random>

#include <dpipe/random/seed_generator.hpp>

namespace dpipe {

void SeedGenerator::seed(std::optional<std::uint64_t> seed) {
  const std::uint64_t value = seed ? *seed : entropy_seed();
  shared_.seed(value);
  worker_.seed(value);
}

SeedGenerator SeedGenerator::spawn(std::uint64_t worker_id, bool inplace) {
  if (inplace) {
    worker_ = worker_.spawn(worker_id);
    return *this;
  }
  return SeedGenerator(shared_, worker_.spawn(worker_id));
}

std::uint64_t entropy_seed() {
  static std::mutex mutex;
  static std::random_device device;
  const std::lock_guard lock(mutex);
  const std::uint64_t low = device();
  const std::uint64_t high = device();
  return (high << 32) | low;
}

}  // namespace dpipe

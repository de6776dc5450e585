// PhiloxEngine: the Philox4x32-10 rounds and torchdata's counter and spawning rules.

#include <dpipe/core/error.hpp>
#include <dpipe/random/philox.hpp>

namespace dpipe {
namespace {

constexpr std::uint32_t kPhiloxKeyBumpA = 0x9E3779B9;
constexpr std::uint32_t kPhiloxKeyBumpB = 0xBB67AE85;
constexpr std::uint64_t kPhiloxMultiplierA = 0xD2511F53;
constexpr std::uint64_t kPhiloxMultiplierB = 0xCD9E8D57;

PhiloxEngine::Block philox_round(PhiloxEngine::Key key, PhiloxEngine::Block counter) noexcept {
  const std::uint64_t product0 = kPhiloxMultiplierA * counter[0];
  const std::uint64_t product1 = kPhiloxMultiplierB * counter[2];
  const auto lo0 = static_cast<std::uint32_t>(product0);
  const auto hi0 = static_cast<std::uint32_t>(product0 >> 32);
  const auto lo1 = static_cast<std::uint32_t>(product1);
  const auto hi1 = static_cast<std::uint32_t>(product1 >> 32);
  return {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
}

std::uint64_t join_words(std::uint32_t low, std::uint32_t high) noexcept {
  return (static_cast<std::uint64_t>(high) << 32) | low;
}

}  // namespace

PhiloxEngine::Block PhiloxEngine::philox(Key key, Block counter) noexcept {
  for (int round = 0; round < 9; ++round) {
    counter = philox_round(key, counter);
    key[0] += kPhiloxKeyBumpA;
    key[1] += kPhiloxKeyBumpB;
  }
  return philox_round(key, counter);
}

void PhiloxEngine::seed(std::uint64_t seed) {
  key_ = {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  counter_ = {};
  cache_.reset();
  const Block reserved = philox(key_, counter_);
  spawn_key_ = {reserved[0], reserved[1]};
  increment_counter();
  seeded_ = true;
}

std::uint64_t PhiloxEngine::generate() {
  require_seeded();
  if (cache_) {
    const std::uint64_t value = join_words((*cache_)[2], (*cache_)[3]);
    cache_.reset();
    return value;
  }
  cache_ = philox(key_, counter_);
  increment_counter();
  return join_words((*cache_)[0], (*cache_)[1]);
}

PhiloxEngine PhiloxEngine::spawn(std::uint64_t index) const {
  require_seeded();
  const std::uint64_t block_index = index - index % 2;
  const Block block = philox(
      spawn_key_, {static_cast<std::uint32_t>(block_index), static_cast<std::uint32_t>(block_index >> 32), 0, 0});
  const std::size_t first = 2 * static_cast<std::size_t>(index % 2);
  return PhiloxEngine(join_words(block[first], block[first + 1]));
}

void PhiloxEngine::require_seeded() const {
  if (!seeded_) DPIPE_THROW(UsageError, "Please provide seed to PhiloxEngine");
}

void PhiloxEngine::increment_counter() noexcept {
  for (auto& word : counter_) {
    if (++word != 0) return;
  }
  counter_ = {1, 0, 0, 0};  // 2^128 wraps to block 1: block 0 stays reserved for spawning
}

}  // namespace dpipe

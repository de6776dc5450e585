// PhiloxEngine, SeedGenerator and PythonRandom: the non-template parts of dpipe/random/.

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>

#include <dpipe/core/error.hpp>
#include <dpipe/random/philox.hpp>
#include <dpipe/random/python_random.hpp>
#include <dpipe/random/seed_generator.hpp>

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

// --- PhiloxEngine ---------------------------------------------------------------------------------

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

// --- SeedGenerator --------------------------------------------------------------------------------

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
  return join_words(device(), device());
}

// --- PythonRandom ---------------------------------------------------------------------------------

void PythonRandom::seed(std::uint64_t seed) {
  // init_genrand(19650218), then init_by_array(key) with the seed's 32-bit words, least
  // significant first; 0 is the one-word key [0].
  const std::uint32_t key[2] = {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  const std::size_t key_length = seed >> 32 ? 2 : 1;

  state_[0] = 19650218U;
  for (std::uint32_t i = 1; i < kStateSize; ++i) {
    state_[i] = 1812433253U * (state_[i - 1] ^ (state_[i - 1] >> 30)) + i;
  }
  std::size_t i = 1;
  std::size_t j = 0;
  for (std::size_t k = std::max(kStateSize, key_length); k > 0; --k) {
    state_[i] =
        (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525U)) + key[j] + static_cast<std::uint32_t>(j);
    ++i;
    ++j;
    if (i >= kStateSize) {
      state_[0] = state_[kStateSize - 1];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (std::size_t k = kStateSize - 1; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941U)) - static_cast<std::uint32_t>(i);
    ++i;
    if (i >= kStateSize) {
      state_[0] = state_[kStateSize - 1];
      i = 1;
    }
  }
  state_[0] = 0x80000000U;
  index_ = kStateSize;
}

void PythonRandom::twist() {
  constexpr std::size_t kShift = 397;
  constexpr std::uint32_t kMatrixA = 0x9908b0dfU;
  constexpr std::uint32_t kUpperMask = 0x80000000U;
  constexpr std::uint32_t kLowerMask = 0x7fffffffU;
  const auto mix = [&](std::size_t k, std::size_t next, std::size_t far) {
    const std::uint32_t y = (state_[k] & kUpperMask) | (state_[next] & kLowerMask);
    state_[k] = state_[far] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
  };
  std::size_t k = 0;
  for (; k < kStateSize - kShift; ++k) mix(k, k + 1, k + kShift);
  for (; k < kStateSize - 1; ++k) mix(k, k + 1, k + kShift - kStateSize);
  mix(kStateSize - 1, 0, kShift - 1);
  index_ = 0;
}

std::uint64_t PythonRandom::wide_bits(unsigned bits) {
  if (bits > 64) DPIPE_THROW(InvalidArgument, "getrandbits supports at most 64 bits, got {}", bits);
  const std::uint64_t low = next_uint32();
  const std::uint64_t high = next_uint32() >> (64 - bits);
  return low | (high << 32);
}

void PythonRandom::throw_empty_randbelow() { DPIPE_THROW(InvalidArgument, "randbelow requires n > 0"); }

void PythonRandom::throw_empty_randint(std::int64_t low, std::int64_t high) {
  DPIPE_THROW(InvalidArgument, "empty range for randint({}, {})", low, high);
}

double PythonRandom::random() {
  const std::uint32_t high = next_uint32() >> 5;
  const std::uint32_t low = next_uint32() >> 6;
  return (static_cast<double>(high) * 67108864.0 + static_cast<double>(low)) * (1.0 / 9007199254740992.0);
}

std::size_t PythonRandom::choose_index(const std::vector<double>& weights) {
  if (weights.empty()) DPIPE_THROW(InvalidArgument, "choices needs at least one weight");
  std::vector<double> cumulative(weights.size());
  double running = 0.0;
  for (std::size_t i = 0; i < weights.size(); ++i) cumulative[i] = running += weights[i];
  const double total = cumulative.back();
  if (!(total > 0.0)) DPIPE_THROW(InvalidArgument, "Total of weights must be greater than zero");
  if (!std::isfinite(total)) DPIPE_THROW(InvalidArgument, "Total of weights must be finite");
  // bisect_right(cumulative, random() * total, 0, n - 1)
  const auto last = cumulative.end() - 1;
  return static_cast<std::size_t>(std::upper_bound(cumulative.begin(), last, random() * total) - cumulative.begin());
}

}  // namespace dpipe

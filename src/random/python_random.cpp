// PythonRandom: CPython's MT19937 seeding, getrandbits and _randbelow.

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <dpipe/core/error.hpp>
#include <dpipe/random/python_random.hpp>

namespace dpipe {

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

std::vector<std::size_t> PythonRandom::sample_indices(std::size_t n, std::size_t k) {
  if (k > n) DPIPE_THROW(InvalidArgument, "Sample larger than population or is negative");
  std::vector<std::size_t> result;
  result.reserve(k);
  // CPython picks the pool method when a list of n is smaller than a set of k (same arithmetic).
  std::size_t set_size = 21;
  if (k > 5) {
    const double exponent = std::ceil(std::log(static_cast<double>(k * 3)) / std::log(4.0));
    set_size += static_cast<std::size_t>(std::pow(4.0, exponent));
  }
  if (n <= set_size) {
    std::vector<std::size_t> pool(n);
    for (std::size_t i = 0; i < n; ++i) pool[i] = i;
    for (std::size_t i = 0; i < k; ++i) {
      const auto j = static_cast<std::size_t>(randbelow(n - i));
      result.push_back(pool[j]);
      pool[j] = pool[n - i - 1];
    }
  } else {
    std::unordered_set<std::size_t> selected;
    for (std::size_t i = 0; i < k; ++i) {
      auto j = static_cast<std::size_t>(randbelow(n));
      while (selected.contains(j)) j = static_cast<std::size_t>(randbelow(n));
      selected.insert(j);
      result.push_back(j);
    }
  }
  return result;
}

}  // namespace dpipe

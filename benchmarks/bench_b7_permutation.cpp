// B7: a global shuffle order of 10M indices, per position from IndexPermutation (no table) against
// a Fisher-Yates shuffle of an iota vector (std::shuffle with std::mt19937_64). Goal: at most
// 5 ns per index for the permutation. The permutation is computed as the global sampler computes
// it, `indices()` over runs of 64 positions (a step of batch(64)); a row beside it computes one
// position at a time. They run in turn with Fisher-Yates, the best of 3 runs each, so that a slow
// spell of the machine hits all. A last row, n = 2^24 (a whole 4096 x 4096 network, with no cycle
// walking; 10M is a 2442 x 4096 network whose 2432 values past 10M walk), shows what the walks
// cost.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include <dpipe/random/index_permutation.hpp>

#include "harness.hpp"

namespace {

constexpr std::uint64_t kCount = 10'000'000;
constexpr std::uint64_t kNetwork = std::uint64_t{1} << 24;  // a network of the size of 10M's
constexpr std::size_t kRun = 64;                            // the positions of one step of batch(64)
constexpr int kRepeats = 3;

/// The sum of `permutation` over all its positions, computed kRun at a time.
std::uint64_t sum_of(const dpipe::IndexPermutation& permutation) {
  std::array<std::uint64_t, kRun> run{};
  std::uint64_t sum = 0;
  for (std::uint64_t first = 0; first < permutation.size(); first += kRun) {
    const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(kRun, permutation.size() - first));
    permutation.indices(first, count, run.data());
    for (std::size_t i = 0; i < count; ++i) sum += run[i];
  }
  dpipe::bench::keep(sum);
  return sum;
}

/// The sum of `permutation` over all its positions, computed one position at a time.
std::uint64_t sum_one_by_one(const dpipe::IndexPermutation& permutation) {
  std::uint64_t sum = 0;
  for (std::uint64_t position = 0; position < permutation.size(); ++position) sum += permutation(position);
  dpipe::bench::keep(sum);
  return sum;
}

}  // namespace

int main() {
  const dpipe::IndexPermutation permutation(kCount, 42);
  std::vector<std::uint64_t> indices(kCount);
  std::mt19937_64 generator(42);
  std::uint64_t shuffled_sum = 0;
  const auto fisher_yates = [&] {
    std::iota(indices.begin(), indices.end(), std::uint64_t{0});
    std::shuffle(indices.begin(), indices.end(), generator);
    shuffled_sum = std::accumulate(indices.begin(), indices.end(), std::uint64_t{0});
    dpipe::bench::keep(shuffled_sum);
    return kCount;
  };
  std::uint64_t permuted_sum = 0;
  std::uint64_t elements = 0;
  const auto [permuted, shuffled] = dpipe::bench::best_seconds_in_turn(
      kRepeats,
      [&] {
        permuted_sum = sum_of(permutation);
        return kCount;
      },
      fisher_yates, elements);
  std::uint64_t one_by_one_sum = 0;
  const auto [one_by_one, shuffled_again] = dpipe::bench::best_seconds_in_turn(
      kRepeats,
      [&] {
        one_by_one_sum = sum_one_by_one(permutation);
        return kCount;
      },
      fisher_yates, elements);
  const dpipe::IndexPermutation whole_network(kNetwork, 42);
  std::uint64_t network_sum = 0;
  std::uint64_t network_elements = 0;
  const double network = dpipe::bench::best_seconds(
      kRepeats,
      [&] {
        network_sum = sum_of(whole_network);
        return kNetwork;
      },
      network_elements);

  const std::uint64_t expected = kCount * (kCount - 1) / 2;  // every index once
  const bool ok = permuted_sum == expected && one_by_one_sum == expected && shuffled_sum == expected &&
                  network_sum == kNetwork * (kNetwork - 1) / 2;
  std::printf("B7 permutation: a shuffled order of 10M indices, per position against Fisher-Yates\n");
  dpipe::bench::report("IndexPermutation, runs of 64 positions", permuted, elements);
  dpipe::bench::report("Fisher-Yates (iota + std::shuffle, mt19937_64)", shuffled, elements);
  dpipe::bench::report("IndexPermutation, one position at a time", one_by_one, elements);
  dpipe::bench::report("  Fisher-Yates, in turn with it", shuffled_again, elements);
  dpipe::bench::report("IndexPermutation, n = 2^24 (no walks)", network, network_elements);
  const double per_index = 1e9 / static_cast<double>(elements);
  std::printf(
      "B7 result: IndexPermutation %.2f ns/index (one at a time %.2f), Fisher-Yates %.2f ns/index, time ratio "
      "%.2fx (goal <= 5 ns); %.2f ns/index without walks%s\n",
      permuted * per_index, one_by_one * per_index, shuffled * per_index, permuted / shuffled,
      network * 1e9 / static_cast<double>(network_elements), ok ? "" : "  CHECKSUM MISMATCH");
  return ok ? 0 : 1;
}

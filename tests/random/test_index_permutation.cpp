// IndexPermutation: a bijection for every small n and for sampled large ones, the same order for the
// same key, and chi-square tests over many keys of where positions land and of neighbours.

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/random/index_permutation.hpp>

#include "random/vector_code.hpp"

namespace {

using dpipe::IndexPermutation;

/// Whether `perm` hits every index of [0, size()) exactly once.
bool is_bijection(const IndexPermutation& perm) {
  std::vector<bool> seen(perm.size());
  for (std::uint64_t position = 0; position < perm.size(); ++position) {
    const std::uint64_t index = perm(position);
    if (index >= perm.size() || seen[index]) return false;
    seen[index] = true;
  }
  return true;
}

/// The whole order of `perm`.
std::vector<std::uint64_t> order_of(const IndexPermutation& perm) {
  std::vector<std::uint64_t> order;
  for (std::uint64_t position = 0; position < perm.size(); ++position) order.push_back(perm(position));
  return order;
}

/// Pearson's statistic of `counts` against `expected` in every cell.
double pearson(const std::vector<double>& counts, double expected) {
  double statistic = 0;
  for (const double count : counts) statistic += (count - expected) * (count - expected) / expected;
  return statistic;
}

// The 0.999 quantiles of the chi-square distribution (significance 0.001), computed offline with
// mpmath 1.3: bisection on x until gammainc(df / 2, x / 2, inf, regularized=True) == 0.001.
constexpr double kChiSquare1 = 10.827566;      // df 1
constexpr double kChiSquare4 = 18.466827;      // df 4
constexpr double kChiSquare8 = 26.124482;      // df 8
constexpr double kChiSquare10 = 29.588298;     // df 10
constexpr double kChiSquare14 = 36.123274;     // df 14
constexpr double kChiSquare81 = 126.082558;    // df 81
constexpr double kChiSquare121 = 174.816362;   // df 121
constexpr double kChiSquare225 = 296.287926;   // df 225
constexpr double kChiSquare598 = 710.592633;   // df 598
constexpr double kChiSquare998 = 1141.778841;  // df 998

TEST_CASE("IndexPermutation: a bijection of 0..n-1 for every n up to 3000", "[random][permutation]") {
  for (const std::uint64_t key : {0ULL, 1ULL, 0xdeadbeefcafef00dULL}) {
    std::vector<std::uint64_t> failed;
    for (std::uint64_t n = 1; n <= 3000; ++n) {
      if (!is_bijection(IndexPermutation(n, key))) failed.push_back(n);
    }
    CAPTURE(key);
    CHECK(failed.empty());
  }
}

TEST_CASE("IndexPermutation: a bijection of sampled large ranges", "[random][permutation]") {
  for (const std::uint64_t n : {4096ULL, 4097ULL, 65535ULL, 65536ULL, 1'000'003ULL, 10'000'000ULL}) {
    CAPTURE(n);
    CHECK(is_bijection(IndexPermutation(n, 42)));
  }
}

TEST_CASE("IndexPermutation: the widest ranges stay in range and apart on a sample", "[random][permutation]") {
  // 2^32 + 1 is a (2^16 + 1) x 2^16 network; 2^62 + 3 a (2^31 + 1) x 2^31 one; 2^63 and 2^64 - 1
  // have the widest left radix, a = 2^32 (for 2^64 - 1 the network's last value walks).
  for (const std::uint64_t n : {(1ULL << 32) + 1, (1ULL << 62) + 3, 1ULL << 63, ~0ULL}) {
    CAPTURE(n);
    const IndexPermutation perm(n, 7);
    std::vector<std::uint64_t> indices;
    for (std::uint64_t i = 0; i < 2000; ++i) {
      indices.push_back(perm(i));
      indices.push_back(perm(n - 1 - i));
      indices.push_back(perm(n / 2 + n / 8000 * i));  // distinct positions: [0, 2000), [n / 2, 3n / 4), the last 2000
    }
    CHECK(std::all_of(indices.begin(), indices.end(), [n](std::uint64_t index) { return index < n; }));
    std::sort(indices.begin(), indices.end());
    CHECK(std::adjacent_find(indices.begin(), indices.end()) == indices.end());
  }
}

TEST_CASE("IndexPermutation: the same size and key give the same order", "[random][permutation]") {
  const IndexPermutation perm(1000, 7);
  CHECK(perm.size() == 1000);
  CHECK(perm.key() == 7);
  const IndexPermutation copy = perm;
  CHECK(order_of(IndexPermutation(1000, 7)) == order_of(perm));
  CHECK(order_of(copy) == order_of(perm));
  CHECK(order_of(perm) != order_of(IndexPermutation(1001, 7)));
}

TEST_CASE("IndexPermutation: known answers", "[random][permutation]") {
  // A shuffle order is part of what a checkpoint resumes: a change of these is a breaking change.
  CHECK(order_of(IndexPermutation(10, 0)) == std::vector<std::uint64_t>{1, 8, 5, 7, 4, 6, 9, 2, 3, 0});
  CHECK(order_of(IndexPermutation(10, 1)) == std::vector<std::uint64_t>{7, 1, 0, 3, 6, 5, 8, 9, 2, 4});
  const IndexPermutation wide(1ULL << 40, 123456789);
  CHECK(std::vector<std::uint64_t>{wide(0), wide(1), wide(2), wide((1ULL << 40) - 1)} ==
        std::vector<std::uint64_t>{674135178679, 642119180179, 1012215459712, 961854177350});
  const IndexPermutation ten_million(10'000'000, 42);  // a 2442 x 4096 network
  CHECK(std::vector<std::uint64_t>{ten_million(0), ten_million(1), ten_million(9'999'999)} ==
        std::vector<std::uint64_t>{1000060, 5046322, 7847496});
  const IndexPermutation widest(~0ULL, 42);  // 2^32 x 2^32
  CHECK(std::vector<std::uint64_t>{widest(0), widest(1), widest(~0ULL - 1)} ==
        std::vector<std::uint64_t>{16256829030284629689ULL, 7176878979629035913ULL, 11940668370486095528ULL});
}

TEST_CASE("IndexPermutation: indices() gives operator()'s values for any run of positions", "[random][permutation]") {
  // Runs of every length up to past two vector blocks (64 lanes each), from several starts, over
  // small networks (extra rounds, frequent walks), 10M (walks past 10M) and the widest network;
  // with each vector code the CPU has.
  std::vector<dpipe::VectorCode> codes;
  for (const auto code : {dpipe::VectorCode::kBaseline, dpipe::VectorCode::kAvx2, dpipe::VectorCode::kAvx512}) {
    if (dpipe::set_vector_code(code) == code) codes.push_back(code);
  }
  CHECK(codes.front() == dpipe::VectorCode::kBaseline);
  for (const auto code : codes) {
    CAPTURE(static_cast<int>(code));
    dpipe::set_vector_code(code);
    for (const std::uint64_t n : {1ULL, 2ULL, 7ULL, 100ULL, 4097ULL, 10'000'000ULL, 1ULL << 40, ~0ULL}) {
      CAPTURE(n);
      const IndexPermutation perm(n, 99);
      std::vector<std::uint64_t> mismatched;
      for (const std::uint64_t start :
           std::initializer_list<std::uint64_t>{0, 1, 63, n / 2, n - std::min<std::uint64_t>(n, 200)}) {
        const std::uint64_t first = std::min(start, n - 1);
        for (std::size_t count = 0; count <= std::min<std::uint64_t>(n - first, 200); ++count) {
          std::vector<std::uint64_t> out(count + 1, 12345);  // one past the run, which must stay
          perm.indices(first, count, out.data());
          for (std::size_t i = 0; i < count; ++i) {
            if (out[i] != perm(first + i)) mismatched.push_back(first + i);
          }
          if (out[count] != 12345) mismatched.push_back(~0ULL);
        }
      }
      CHECK(mismatched.empty());
    }
    // a whole order of a mid-sized network in one call
    const IndexPermutation perm(100'003, 5);
    std::vector<std::uint64_t> all(perm.size());
    perm.indices(0, all.size(), all.data());
    CHECK(all == order_of(perm));
  }
  dpipe::set_vector_code(dpipe::VectorCode::kBest);
}

TEST_CASE("IndexPermutation: the smallest ranges", "[random][permutation]") {
  const IndexPermutation empty(0, 3);
  CHECK(empty.size() == 0);
  CHECK(empty.key() == 3);
  for (std::uint64_t key = 0; key < 100; ++key) CHECK(IndexPermutation(1, key)(0) == 0);
}

TEST_CASE("IndexPermutation: different keys give different permutations", "[random][permutation]") {
  for (const std::uint64_t n : {8ULL, 9ULL, 16ULL, 100ULL, 4097ULL}) {
    CAPTURE(n);
    std::vector<std::uint64_t> equal_keys;
    for (std::uint64_t key = 0; key < 200; ++key) {
      const auto order = order_of(IndexPermutation(n, key));
      if (order == order_of(IndexPermutation(n, key + 1)) ||
          order == order_of(IndexPermutation(n, key ^ (1ULL << 63)))) {
        equal_keys.push_back(key);
      }
    }
    CHECK(equal_keys.empty());
  }
}

TEST_CASE("IndexPermutation: over keys each position takes each index equally often",
          "[random][permutation][statistics]") {
  // counts[position][index] over the keys 0, 1, ..., K - 1, against K / n in every cell. The n^2
  // cells of one permutation are dependent (each row and column holds a single 1): their
  // covariance is n / (n - 1) times the projection onto the (n - 1)^2 dimensions where every row
  // and column sums to 0, so Pearson's statistic of K independent uniform permutations tends to
  // n / (n - 1) chi-square((n - 1)^2). The networks (a x b): 16 is 4 x 4 and 12 is 3 x 4; 10 and 3
  // walk out of their 3 x 4 and 2 x 2 ones.
  struct Case {
    std::uint64_t n;
    double critical;
  };
  for (const Case& test :
       {Case{16, kChiSquare225}, Case{12, kChiSquare121}, Case{10, kChiSquare81}, Case{3, kChiSquare4}}) {
    const std::uint64_t n = test.n;
    constexpr std::uint64_t kKeys = 20000;
    std::vector<double> counts(n * n);
    for (std::uint64_t key = 0; key < kKeys; ++key) {
      const IndexPermutation perm(n, key);
      for (std::uint64_t position = 0; position < n; ++position) counts[position * n + perm(position)] += 1;
    }
    const double expected = static_cast<double>(kKeys) / static_cast<double>(n);
    const double statistic = pearson(counts, expected) * static_cast<double>(n - 1) / static_cast<double>(n);
    CAPTURE(n);
    CHECK(statistic < test.critical);
  }
}

TEST_CASE("IndexPermutation: over keys neighbouring positions are not correlated",
          "[random][permutation][statistics]") {
  // Key k (0, 1, ..., K - 1) contributes one pair, positions q = k mod (n - 1) and q + 1: the K
  // samples are independent, and for a uniform permutation (perm(q + 1) - perm(q)) mod n is uniform
  // on [1, n), so the statistic tends to chi-square(n - 2). 1000 and 600 walk out of their 32 x 32
  // and 19 x 32 networks.
  struct Case {
    std::uint64_t n;
    double critical;
  };
  for (const Case& test : {Case{16, kChiSquare14}, Case{12, kChiSquare10}, Case{10, kChiSquare8}, Case{3, kChiSquare1},
                           Case{1000, kChiSquare998}, Case{600, kChiSquare598}}) {
    const std::uint64_t n = test.n;
    constexpr std::uint64_t kKeys = 200000;
    std::vector<double> counts(n - 1);
    for (std::uint64_t key = 0; key < kKeys; ++key) {
      const IndexPermutation perm(n, key);
      const std::uint64_t position = key % (n - 1);
      const std::uint64_t difference = (perm(position + 1) + n - perm(position)) % n;
      counts[difference - 1] += 1;
    }
    const double statistic = pearson(counts, static_cast<double>(kKeys) / static_cast<double>(n - 1));
    CAPTURE(n);
    CHECK(statistic < test.critical);
  }
}

TEST_CASE("IndexPermutation: threads share one permutation", "[random][permutation][concurrency]") {
  const IndexPermutation perm(100'000, 5);
  const auto expected = order_of(perm);
  std::vector<std::vector<std::uint64_t>> orders(4);
  std::vector<std::thread> threads;
  threads.reserve(orders.size());
  for (auto& order : orders) threads.emplace_back([&perm, &order] { order = order_of(perm); });
  for (auto& thread : threads) thread.join();
  for (const auto& order : orders) CHECK(order == expected);  // after the joins: Catch is not thread-safe
}

}  // namespace

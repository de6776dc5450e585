// collate, map_batches, groupby, in_batch_shuffle and bucketbatch. Expected orders of the random
// nodes come from torchdata's algorithms run on CPython's random.

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::GroupByOptions;
using dpipe::testing::check_battery;
using dpipe::testing::collect;
using dpipe::testing::range;
using Groups = std::vector<std::vector<int>>;

TEST_CASE("collate: battery with the default and a custom function", "[iter][collate][battery]") {
  using Columns = std::tuple<std::vector<int>, std::vector<std::string>>;
  check_battery(
      [] {
        return iter::from(range(5))
            .map([](int x) { return std::make_tuple(x, std::to_string(x * x)); })
            .batch(2)
            .collate();
      },
      std::vector<Columns>{{{0, 1}, {"0", "1"}}, {{2, 3}, {"4", "9"}}, {{4}, {"16"}}}, 3);
  auto pairs = iter::from(range(4)).map([](int x) { return std::make_pair(x, -x); }).batch(4) | iter::collate();
  CHECK(collect(pairs) == std::vector<std::pair<std::vector<int>, std::vector<int>>>{{{0, 1, 2, 3}, {0, -1, -2, -3}}});
  auto sums =
      iter::from(range(6)).batch(3).collate([](std::vector<int> batch) { return batch[0] + batch[1] + batch[2]; });
  CHECK(collect(sums) == std::vector<int>{3, 12});
  CHECK(sums.node().name() == "collate");
}

}  // namespace

namespace dpipe_test {
struct Reading {
  int id = 0;
  std::string name;
  std::vector<float> values;
  int unlisted = 0;
  DPIPE_FIELDS(id, name, values)
};
}  // namespace dpipe_test

namespace {

TEST_CASE("collate: a batch of a DPIPE_FIELDS struct becomes a struct of arrays", "[iter][collate][battery]") {
  using dpipe_test::Reading;
  using Batch = dpipe::Columns<Reading>;
  const auto make = [] {
    return iter::from(range(5))
        .map([](int x) {
          return Reading{x, "r" + std::to_string(x), {static_cast<float>(x), 0.5F}, -x};
        })
        .batch(2)
        .collate();
  };
  std::vector<Batch> expected(3);
  expected[0].get<0>() = {0, 1};
  expected[0].get<1>() = {"r0", "r1"};
  expected[0].get<2>() = {{0.0F, 0.5F}, {1.0F, 0.5F}};
  expected[1].get<0>() = {2, 3};
  expected[1].get<1>() = {"r2", "r3"};
  expected[1].get<2>() = {{2.0F, 0.5F}, {3.0F, 0.5F}};
  expected[2].get<0>() = {4};
  expected[2].get<1>() = {"r4"};
  expected[2].get<2>() = {{4.0F, 0.5F}};
  check_battery(make, expected, 3);

  const auto batches = collect(make());
  CHECK(batches[0][&Reading::id] == std::vector<int>{0, 1});
  CHECK(batches[1][&Reading::name] == std::vector<std::string>{"r2", "r3"});
  CHECK(batches[2][&Reading::values] == std::vector<std::vector<float>>{{4.0F, 0.5F}});
  CHECK(batches[1].size() == 2);
  CHECK(batches[2].size() == 1);
  CHECK_THROWS_MATCHES(
      batches[0][&Reading::unlisted], dpipe::InvalidArgument,
      Catch::Message("Columns<dpipe_test::Reading>: the member is not one of the fields dpipe_test::Reading declares "
                     "with DPIPE_FIELDS"));
}

TEST_CASE("map_batches: battery / the last short batch is processed too", "[iter][map_batches][battery]") {
  const auto make = [] {
    return iter::from(range(7)).map_batches(
        [](std::vector<int> batch) {
          std::vector<int> out;
          for (int x : batch) out.push_back(x * 10);
          out.push_back(-static_cast<int>(batch.size()));
          return out;
        },
        3);
  };
  check_battery(make, std::vector<int>{0, 10, 20, -3, 30, 40, 50, -3, 60, -1}, std::nullopt);
  auto pipe = make();
  CHECK_THROWS_MATCHES(pipe.len(), dpipe::LengthError,
                       Catch::Message(pipe.node().label() + "'s length relies on the output of its function."));
  CHECK_THROWS_MATCHES(iter::from(range(3)).map_batches([](std::vector<int> b) { return b; }, 0),
                       dpipe::InvalidArgument, Catch::Message("Batch size is required to be larger than 0!"));
}

TEST_CASE("groupby: torchdata's grouping / eviction and end-of-stream order", "[iter][groupby][battery]") {
  const auto mod = [](int m) { return [m](const int& x) { return x % m; }; };
  check_battery([&] { return iter::from(range(10)).groupby(mod(3), GroupByOptions()); },
                Groups{{0, 3, 6, 9}, {1, 4, 7}, {2, 5, 8}}, std::nullopt);
  check_battery([&] { return iter::from(range(20)).groupby(mod(3), GroupByOptions().group_size(3)); },
                Groups{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}, {9, 12, 15}, {10, 13, 16}, {11, 14, 17}, {18}, {19}},
                std::nullopt);
  check_battery(
      [&] {
        return iter::from(range(20)).groupby(
            mod(4), GroupByOptions().buffer_size(6).group_size(3).guaranteed_group_size(2).drop_remaining(true));
      },
      Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7, 11}, {8, 12}, {9, 13}, {10, 14, 18}, {15, 19}, {16}, {17}}, std::nullopt);
}

TEST_CASE("groupby_keyed: an evicted group carries its own key", "[iter][groupby]") {
  // torchdata would pair the evicted group [4, 5] with the current element's key 1.
  auto pipe = iter::from(std::vector<int>{1, 2, 3, 4, 5, 11, 12, 13, 21})
                  .groupby_keyed([](const int& x) { return x / 10; },
                                 GroupByOptions().buffer_size(4).group_size(3).guaranteed_group_size(1));
  using Keyed = std::pair<int, std::vector<int>>;
  CHECK(collect(pipe) == std::vector<Keyed>{{0, {1, 2, 3}}, {0, {4, 5}}, {1, {11, 12, 13}}, {2, {21}}});
}

TEST_CASE("groupby: the buffer never grows / small groups fail or drop", "[iter][groupby]") {
  auto failing =
      iter::from(range(9)).groupby([](const int& x) { return x % 3; }, GroupByOptions().buffer_size(3).group_size(3));
  CHECK_THROWS_MATCHES(collect(failing), dpipe::BufferOverflowError,
                       Catch::Message("Failed to group items (" + failing.node().label() +
                                      ": the buffer of 3 elements is full and its biggest group has 1 elements, fewer "
                                      "than guaranteed_group_size 3; raise buffer_size or set drop_remaining)"));
  auto dropping = iter::from(range(9)).groupby([](const int& x) { return x % 3; },
                                               GroupByOptions().buffer_size(3).group_size(3).drop_remaining(true));
  CHECK(collect(dropping) == Groups{{7}, {8}});  // every eviction drops a single; the last two remain
  CHECK_THROWS_MATCHES(
      iter::from(range(3)).groupby([](const int& x) { return x; }, GroupByOptions().buffer_size(2).group_size(3)),
      dpipe::InvalidArgument,
      Catch::Message("group_size must be > 0 and <= buffer_size (got group_size 3, buffer_size 2)"));
  CHECK_THROWS_MATCHES(
      iter::from(range(3)).groupby([](const int& x) { return x; }, GroupByOptions().guaranteed_group_size(2)),
      dpipe::InvalidArgument,
      Catch::Message("guaranteed_group_size must be > 0 and <= group_size and group_size must be set"));
}

TEST_CASE("in_batch_shuffle: random.sample per batch for a seed / pass-through when disabled",
          "[iter][in_batch_shuffle][battery]") {
  const auto make = [] {
    auto pipe = iter::from(range(9)).batch(3).in_batch_shuffle();
    dynamic_cast<dpipe::RandomDataPipe&>(pipe.node()).set_seed(0);
    return pipe;
  };
  check_battery(make, Groups{{1, 2, 0}, {4, 5, 3}, {7, 8, 6}}, 3);
  auto pipe = make();
  dynamic_cast<dpipe::ShufflingDataPipe&>(pipe.node()).set_shuffle(false);
  CHECK(collect(pipe) == Groups{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}});
}

TEST_CASE("bucketbatch: torchdata's composition / seeded by the graph seeder", "[iter][bucketbatch][battery]") {
  const auto seeded = [](auto pipe) {
    dpipe::SeedGenerator seeds(0);
    dpipe::graph::set_graph_random_seed(pipe.ptr(), seeds);
    return pipe;
  };
  check_battery([&] { return seeded(iter::from(range(20)).bucketbatch(3, false, 2)); },
                Groups{{3, 5, 1}, {0, 4, 2}, {10, 7, 6}, {11, 8, 9}, {15, 16, 13}, {17, 14, 12}, {19, 18}},
                std::nullopt);
  const auto descending = [](std::vector<int> bucket) {
    std::sort(bucket.begin(), bucket.end(), std::greater<>());
    return bucket;
  };
  check_battery([&] { return seeded(iter::from(range(20)).bucketbatch(2, false, 2, 2, descending)); },
                Groups{{3, 1}, {6, 4}, {7, 5}, {2, 0}, {10, 8}, {15, 13}, {14, 12}, {11, 9}, {17, 16}, {19, 18}},
                std::nullopt);
  CHECK_THROWS_MATCHES(iter::from(range(3)).bucketbatch(0), dpipe::InvalidArgument,
                       Catch::Message("Batch size is required to be larger than 0!"));
  CHECK_THROWS_MATCHES(iter::from(range(3)).bucketbatch(2, false, 0), dpipe::InvalidArgument,
                       Catch::Message("Number of batches is required to be larger than 0!"));
  CHECK_THROWS_MATCHES(iter::from(range(3)).bucketbatch(2, false, 2, 0), dpipe::InvalidArgument,
                       Catch::Message("Number of buckets is required to be larger than 0!"));
  // Without in_batch_shuffle it shuffles with a buffer instead; every element still comes out once.
  auto plain = seeded(iter::from(range(20)).bucketbatch(4, true, 2, 1, nullptr, false));
  auto batches = collect(plain);
  std::vector<int> seen;
  for (const auto& batch : batches) seen.insert(seen.end(), batch.begin(), batch.end());
  std::sort(seen.begin(), seen.end());
  CHECK(seen == range(20));
  CHECK(batches.size() == 5);
}

}  // namespace

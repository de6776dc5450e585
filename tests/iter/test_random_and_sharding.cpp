// shuffle (bit-exact against torchdata's algorithm on CPython's random), sharding_filter,
// sharding_round_robin_dispatch, and apply_sharding.

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::testing::check_battery;
using dpipe::testing::collect;

using dpipe::testing::range;
using dpipe::testing::seeded;

// Expected orders come from torchdata's Shuffler algorithm run on CPython's random.Random.
TEST_CASE("shuffle: torchdata's order for a seed (reference vector)", "[iter][shuffle][determinism]") {
  CHECK(collect(seeded(iter::from(range(10)).shuffle(3), 6679402142117448868ULL)) ==
        std::vector<int>{1, 3, 0, 5, 4, 7, 2, 6, 8, 9});
}

TEST_CASE("shuffle: battery with a seeded buffer smaller and larger than the data", "[iter][shuffle][battery]") {
  check_battery([] { return seeded(iter::from(range(20)).shuffle(5), 123); },
                std::vector<int>{0, 2, 5, 3, 6, 7, 10, 8, 4, 13, 9, 15, 11, 1, 18, 16, 12, 14, 17, 19}, 20);
  check_battery([] { return seeded(iter::from(range(12)) | iter::shuffle(100), 7); },
                std::vector<int>{5, 2, 8, 0, 3, 11, 9, 1, 7, 10, 4, 6}, 12);
}

TEST_CASE("shuffle: a seed applies to one iteration / set_shuffle(false) passes through", "[iter][shuffle]") {
  auto pipe = seeded(iter::from(range(10)).shuffle(3), 6679402142117448868ULL);
  const auto first = collect(pipe);
  auto second = collect(pipe);  // seeded from the OS entropy source
  std::sort(second.begin(), second.end());
  CHECK(second == range(10));
  auto& node = dynamic_cast<dpipe::ShufflingDataPipe&>(pipe.node());
  node.set_shuffle(false);
  CHECK(collect(pipe) == range(10));
  node.set_seed(6679402142117448868ULL);  // kept while disabled, used once enabled
  CHECK(collect(pipe) == range(10));
  node.set_shuffle(true);
  CHECK(collect(pipe) == first);
}

TEST_CASE("shuffle: bad buffer size", "[iter][shuffle]") {
  CHECK_THROWS_MATCHES(iter::from(range(3)).shuffle(0), dpipe::InvalidArgument,
                       Catch::Message("buffer_size should be larger than 0"));
}

TEST_CASE("sharding_filter: battery for each instance / lengths", "[iter][sharding][battery]") {
  for (std::size_t instance = 0; instance < 3; ++instance) {
    INFO("instance " << instance);
    std::vector<int> expected;
    for (int i = static_cast<int>(instance); i < 13; i += 3) expected.push_back(i);
    check_battery(
        [&] {
          auto pipe = iter::from(range(13)).sharding_filter();
          dpipe::graph::apply_sharding(pipe.ptr(), 3, instance);
          return pipe;
        },
        expected, expected.size());
  }
  auto one = iter::from(range(1)).sharding_filter();
  dpipe::graph::apply_sharding(one.ptr(), 2, 1);
  CHECK(one.len() == 0);
  CHECK(collect(iter::from(range(4)).sharding_filter()) == range(4));  // unsharded: everything
  auto unsized = iter::from(range(4)).filter([](int) { return true; }).sharding_filter();
  CHECK_THROWS_MATCHES(unsized.len(), dpipe::LengthError,
                       Catch::Message(unsized.node().label() + " instance doesn't have valid length"));
}

TEST_CASE("sharding_filter: groups combine as worker + workers * rank", "[iter][sharding]") {
  for (std::size_t rank = 0; rank < 2; ++rank) {
    for (std::size_t worker = 0; worker < 2; ++worker) {
      auto pipe = iter::from(range(10)).sharding_filter();
      auto& node = dynamic_cast<iter::ShardingFilter<int>&>(pipe.node());
      node.apply_sharding(2, rank, dpipe::ShardingPriority::kDistributed);
      node.apply_sharding(2, worker, dpipe::ShardingPriority::kMultiprocessing);
      CHECK(node.num_instances() == 4);
      CHECK(node.instance_id() == worker + 2 * rank);
    }
  }
  auto filtered = iter::from(range(10)).sharding_filter(dpipe::ShardingPriority::kMultiprocessing);
  auto& node = dynamic_cast<iter::ShardingFilter<int>&>(filtered.node());
  node.apply_sharding(2, 1, dpipe::ShardingPriority::kDistributed);  // filtered out
  node.apply_sharding(5, 3, dpipe::ShardingPriority::kMultiprocessing);
  CHECK(collect(filtered) == std::vector<int>{3, 8});
}

TEST_CASE("sharding_filter: a batch of a share holds only its own elements", "[iter][sharding]") {
  // A batch reserves room for its size and pulls that many; the filter must not read its whole
  // stride of source elements into the batch's vector, which would double its memory.
  auto batches = iter::from(range(20)).sharding_filter().batch(4);
  dpipe::graph::apply_sharding(batches.ptr(), 2, 1);
  std::vector<std::vector<int>> seen;
  for (auto& batch : batches) {
    CHECK(batch.capacity() == 4);
    seen.push_back(std::move(batch));
  }
  CHECK(seen == std::vector<std::vector<int>>{{1, 3, 5, 7}, {9, 11, 13, 15}, {17, 19}});
}

TEST_CASE("sharding_filter: what precedes an upstream failure is still this instance's share",
          "[iter][sharding][error_policy]") {
  // The map throws at 7 after appending 0..6 in one bulk read; a skipping map below the filter
  // maps what was appended before the failure, which must be instance 1's elements only.
  auto sharded = iter::from(range(12))
                     .map([](int x) {
                       if (x == 7) throw std::out_of_range("upstream");
                       return x;
                     })
                     .sharding_filter();
  dpipe::graph::apply_sharding(sharded.ptr(), 3, 1);
  std::vector<int> seen;
  CHECK_THROWS_MATCHES(
      [&] {
        for (int x : sharded.map([](int x) { return x * 10; }, dpipe::OnError::skip())) seen.push_back(x);
      }(),
      std::out_of_range, Catch::Message("upstream"));
  CHECK(seen == std::vector<int>{10, 40});
}

TEST_CASE("sharding_filter: torchdata's errors", "[iter][sharding]") {
  const auto make = [] { return iter::from(range(10)).sharding_filter(); };
  auto pipe = make();
  auto& node = dynamic_cast<iter::ShardingFilter<int>&>(pipe.node());
  CHECK_THROWS_MATCHES(node.apply_sharding(3, 3, dpipe::ShardingPriority::kDefault), dpipe::InvalidArgument,
                       Catch::Message("instance_id(3) should be smaller than num_of_instances(3)"));
  node.apply_sharding(2, 1, dpipe::ShardingPriority::kDefault);
  CHECK_THROWS_MATCHES(node.apply_sharding(5, 3, dpipe::ShardingPriority::kMultiprocessing), dpipe::UsageError,
                       Catch::Message("ShardingFilter cannot mix DEFAULT and non DEFAULT groups"));
  auto reverse = make();
  auto& reverse_node = dynamic_cast<iter::ShardingFilter<int>&>(reverse.node());
  reverse_node.apply_sharding(5, 3, dpipe::ShardingPriority::kMultiprocessing);
  CHECK_THROWS_MATCHES(reverse_node.apply_sharding(2, 1, dpipe::ShardingPriority::kDefault), dpipe::UsageError,
                       Catch::Message("ShardingFilter cannot mix DEFAULT and non DEFAULT groups"));
}

TEST_CASE("apply_sharding: sharding twice on one path is an error / separate branches are fine",
          "[iter][sharding][graph]") {
  auto twice = iter::from(range(10)).sharding_filter();
  auto outer = twice.sharding_filter();
  CHECK_THROWS_MATCHES(dpipe::graph::apply_sharding(outer.ptr(), 2, 0), dpipe::UsageError,
                       Catch::Message("Sharding twice on a single pipeline is likely unintended and will cause data "
                                      "loss. Sharding already applied to " +
                                      outer.node().label() + " while trying to apply to " + twice.node().label()));
  auto left = iter::from(range(6)).sharding_filter();
  auto right = iter::from(range(6)).map([](int x) { return x * 10; }).sharding_filter();
  auto zipped = left.zip(right);
  dpipe::graph::apply_sharding(zipped.ptr(), 2, 1);
  CHECK(collect(zipped) == std::vector<std::tuple<int, int>>{{1, 10}, {3, 30}, {5, 50}});
}

TEST_CASE("sharding_round_robin_dispatch: identity in process / only MULTIPROCESSING", "[iter][sharding][battery]") {
  check_battery(
      [] { return iter::from(range(5)).sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing); },
      range(5), 5);
  CHECK_THROWS_MATCHES(
      iter::from(range(5)).sharding_round_robin_dispatch(dpipe::ShardingPriority::kDistributed),
      dpipe::NotSupportedError,
      Catch::Message("`sharding_round_robin_dispatch` currently only supports "
                     "`SHARDING_PRIORITIES.MULTIPROCESSING`.Please open issue on github for your feature "
                     "request."));
}

}  // namespace

namespace {

// Expected splits: torchdata's RandomSplitter algorithm run on CPython's random.
TEST_CASE("random_split: torchdata's docstring split / the same every epoch", "[iter][random_split][determinism]") {
  auto splits = iter::from(range(10)).random_split({{"train", 0.5}, {"valid", 0.5}}, /*seed=*/0, /*total_length=*/10);
  REQUIRE(splits.size() == 2);
  CHECK(collect(splits[0]) == std::vector<int>{2, 3, 5, 7, 8});
  CHECK(collect(splits[1]) == std::vector<int>{0, 1, 4, 6, 9});
  CHECK(collect(splits[0]) == std::vector<int>{2, 3, 5, 7, 8});
  auto valid = iter::from(range(10)).random_split({{"train", 0.5}, {"valid", 0.5}}, 0, 10, "valid");
  CHECK(collect(valid) == std::vector<int>{0, 1, 4, 6, 9});
  auto piped = iter::from(range(10)) | iter::random_split({{"train", 0.5}, {"valid", 0.5}}, 0, 10);
  CHECK(collect(piped[0]) == std::vector<int>{2, 3, 5, 7, 8});
  auto piped_valid = iter::from(range(10)) | iter::random_split({{"train", 0.5}, {"valid", 0.5}}, 0, 10, "valid");
  CHECK(collect(piped_valid) == std::vector<int>{0, 1, 4, 6, 9});
  auto three = iter::from(range(17)).random_split({{"train", 0.7}, {"valid", 0.2}, {"test", 0.1}}, 123);
  CHECK(collect(three[0]) == std::vector<int>{0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 13});
  CHECK(collect(three[1]) == std::vector<int>{8, 14, 15});
  CHECK(collect(three[2]) == std::vector<int>{4, 16});
}

TEST_CASE("random_split: battery / integer weights give lengths", "[iter][random_split][battery]") {
  const auto make = [](std::size_t which) {
    return [which] { return iter::from(range(10)).random_split({{"a", 3}, {"b", 5}, {"c", 2}}, 42)[which]; };
  };
  check_battery(make(0), std::vector<int>{1, 3, 7}, 3);
  check_battery(make(1), std::vector<int>{0, 2, 5, 8, 9}, 5);
  check_battery(make(2), std::vector<int>{4, 6}, 2);
  auto fractional = iter::from(range(10)).random_split({{"a", 0.33}, {"b", 0.67}}, 1);  // 3.3 and 6.7 of 10
  CHECK_THROWS_MATCHES(
      fractional[0].len(), dpipe::LengthError,
      Catch::Message("Lengths of the split cannot be known in advance. Please supply integer `weights` "
                     "that sum up to `total_length`.\nAlternatively, use `datapipe.set_length(LENGTH)` to "
                     "manually set the desired length."));
}

TEST_CASE("random_split: one split at a time (T54) / override_seed / errors", "[iter][random_split]") {
  auto source = iter::from(range(10));
  auto splits = source.random_split({{"train", 0.5}, {"valid", 0.5}}, 0, 10);
  auto train = splits[0].begin();
  CHECK(*train == 2);
  CHECK(collect(splits[1]) == std::vector<int>{0, 1, 4, 6, 9});
  ++train;
  CHECK_THROWS_WITH(*train, Catch::StartsWith("This iterator has been invalidated because another iterator has been "
                                              "created from the same IterDataPipe: " +
                                              source.node().label()));
  iter::override_seed(splits[0], 1);
  CHECK(collect(splits[0]) == std::vector<int>{0, 3, 4, 8, 9});  // torchdata's algorithm on CPython, seed 1
  CHECK_THROWS_MATCHES(source.random_split({{"train", 1}}, 0, 10, "test"), dpipe::KeyError,
                       Catch::Message("`target=test` does not match any key in `weights`."));
  auto unsized = iter::from(range(10)).filter([](int) { return true; });
  CHECK_THROWS_MATCHES(unsized.random_split({{"a", 1}}, 0), dpipe::InvalidArgument,
                       Catch::Message("RandomSplitter needs `total_length`, but it is unable to infer it from the "
                                      "`source_datapipe`: " +
                                      unsized.node().label() + "."));
  auto too_long = iter::from(range(12)).random_split({{"a", 1}, {"b", 1}}, 0, 10);
  CHECK_THROWS_MATCHES(collect(too_long[0]), dpipe::InvalidArgument,
                       Catch::Message(too_long[0].node().inputs()[0]->label() +
                                      ": the source has more than total_length = 10 elements"));
}

}  // namespace

namespace {

TEST_CASE("DrainOrder: the same order as popping from a list", "[iter][shuffle]") {
  std::mt19937 random(7);
  for (std::size_t size :
       {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{64}, std::size_t{1000}}) {
    std::vector<std::size_t> list(size);
    std::iota(list.begin(), list.end(), 0);
    dpipe::detail::DrainOrder order;
    order.assign(size);
    while (!list.empty()) {
      const std::size_t k = random() % list.size();
      const std::size_t expected = list[k];
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(k));
      CHECK(order.take(k) == expected);
      CHECK(order.remaining() == list.size());
    }
  }
}

}  // namespace

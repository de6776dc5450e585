// Map-style nodes: from (SequenceWrapper), map, to_iter.

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"

namespace {

namespace map = dpipe::map;
using dpipe::testing::check_battery;
using dpipe::testing::collect;

TEST_CASE("map::from: get by index / size / keys / a missing key is a KeyError", "[map][from]") {
  auto pipe = map::from(std::vector<std::string>{"a", "b", "c"});
  CHECK(pipe.get(1) == "b");
  CHECK(pipe.size() == 3);
  CHECK(pipe.keys() == std::vector<std::size_t>{0, 1, 2});
  CHECK(pipe.node().kind() == dpipe::PipeKind::kMap);
  CHECK(pipe.node().element_type() == "long unsigned int -> std::string");
  CHECK_THROWS_MATCHES(pipe.get(3), dpipe::KeyError,
                       Catch::Message(pipe.node().label() + ": index 3 is out of range for 3 elements"));
}

TEST_CASE("map::map: applied on every access / chained and piped", "[map][map]") {
  auto chained = map::from({1, 2, 3}).map([](int x) { return x * 10; });
  auto piped = map::from({1, 2, 3}) | map::map([](int x) { return std::to_string(x); });
  CHECK(chained.get(2) == 30);
  CHECK(piped.get(0) == "1");
  CHECK(piped.size() == 3);
}

TEST_CASE("to_iter: battery over all keys and over chosen keys", "[map][to_iter][battery]") {
  check_battery(
      [] {
        return map::from({5, 6, 7, 8}).map([](int x) { return x + 1; }).to_iter();
      },
      std::vector<int>{6, 7, 8, 9}, 4);
  check_battery(
      [] {
        return map::from({5, 6, 7, 8}).to_iter(std::vector<std::size_t>{3, 0, 0});
      },
      std::vector<int>{8, 5, 5}, 3);
  check_battery([] { return map::from({5, 6}) | map::to_iter(); }, std::vector<int>{5, 6}, 2);
  // torchdata treats an empty key list as "all keys"; dpipe yields nothing.
  CHECK(collect(map::from({5, 6}).to_iter(std::vector<std::size_t>{})).empty());
  auto bad = map::from({5, 6}).to_iter(std::vector<std::size_t>{0, 9});
  auto it = bad.begin();
  CHECK(*it == 5);
  ++it;
  CHECK_THROWS_MATCHES(*it, dpipe::KeyError,
                       Catch::Message(bad.node().inputs()[0]->label() + ": index 9 is out of range for 2 elements"));
}

}  // namespace

namespace {

TEST_CASE("map batch: index-keyed batches / drop_last / out of bound", "[map][batch]") {
  auto batches = map::from({1, 2, 3, 4, 5}).batch(2);
  CHECK(batches.size() == 3);
  CHECK(batches.get(1) == std::vector<int>{3, 4});
  CHECK(batches.get(2) == std::vector<int>{5});
  CHECK_THROWS_MATCHES(batches.get(3), dpipe::KeyError, Catch::Message("Index 3 is out of bound."));
  auto dropped = map::from({1, 2, 3, 4, 5}) | map::batch(2, true);
  CHECK(dropped.size() == 2);
  CHECK_THROWS_MATCHES(dropped.get(2), dpipe::KeyError, Catch::Message("Index 2 is out of bound."));
  CHECK_THROWS_MATCHES(map::from({1}).batch(0), dpipe::InvalidArgument,
                       Catch::Message("Batch size is required to be larger than 0!"));
}

TEST_CASE("map concat and zip: index-keyed composition", "[map][concat][zip]") {
  auto first = map::from({1, 2});
  auto second = map::from({10, 20, 30});
  auto joined = first.concat(second);
  CHECK(joined.size() == 5);
  CHECK(joined.get(1) == 2);
  CHECK(joined.get(2) == 10);
  CHECK(joined.get(4) == 30);
  CHECK_THROWS_MATCHES(joined.get(5), dpipe::KeyError, Catch::Message("Index 5 is out of range."));
  auto zipped = first.zip(map::from(std::vector<std::string>{"a", "b", "c"}));
  CHECK(zipped.size() == 2);
  CHECK(zipped.get(1) == std::tuple<int, std::string>{2, "b"});
  CHECK_THROWS_MATCHES(
      zipped.get(2), dpipe::KeyError,
      Catch::Message("Index 2 is out of range for one of the input MapDataPipes " + zipped.node().label() + "."));
  CHECK(collect(joined.to_iter()) == std::vector<int>{1, 2, 10, 20, 30});
  auto piped = first | map::zip(second);
  CHECK(piped.get(1) == std::tuple<int, int>{2, 20});
}

TEST_CASE("map shuffle: torchdata's docstring order for seed 0 / battery", "[map][shuffle][battery]") {
  const auto make = [] {
    auto pipe = map::from(dpipe::testing::range(10)).shuffle();
    dynamic_cast<dpipe::RandomDataPipe&>(pipe.node()).set_seed(0);
    return pipe;
  };
  check_battery(make, std::vector<int>{7, 8, 1, 5, 3, 4, 2, 0, 9, 6}, 10);
  auto pipe = make();
  dynamic_cast<dpipe::ShufflingDataPipe&>(pipe.node()).set_shuffle(false);
  CHECK(collect(pipe) == dpipe::testing::range(10));
  auto chosen = map::from(dpipe::testing::range(10)).shuffle(std::vector<std::size_t>{4, 5});
  auto values = collect(chosen);
  std::sort(values.begin(), values.end());
  CHECK(values == std::vector<int>{4, 5});
  CHECK(chosen.len() == 2);
}

TEST_CASE("map in_memory_cache: each value read from the source once", "[map][in_memory_cache]") {
  int reads = 0;
  auto cached = map::from({1, 2, 3}).map([&reads](int x) {
    ++reads;
    return x * 2;
  }) | map::in_memory_cache();
  CHECK(cached.get(1) == 4);
  CHECK(cached.get(1) == 4);
  CHECK(reads == 1);
  CHECK(collect(cached.to_iter()) == std::vector<int>{2, 4, 6});
  CHECK(reads == 3);
}

TEST_CASE("map batch / concat / zip / in_memory_cache: battery through to_iter", "[map][battery]") {
  // Map nodes keep no iteration state of their own: the battery runs them under to_iter, whose
  // position is the checkpoint.
  check_battery(
      [] {
        return map::from({1, 2, 3, 4, 5}).batch(2).to_iter();
      },
      std::vector<std::vector<int>>{{1, 2}, {3, 4}, {5}}, 3);
  check_battery(
      [] {
        return map::from({1, 2, 3, 4, 5}).batch(2, true).to_iter();
      },
      std::vector<std::vector<int>>{{1, 2}, {3, 4}}, 2);
  check_battery(
      [] {
        return map::from({1, 2}).concat(map::from({10, 20, 30})).to_iter();
      },
      std::vector<int>{1, 2, 10, 20, 30}, 5);
  using Pair = std::tuple<int, std::string>;
  check_battery(
      [] {
        return map::from({1, 2, 3}).zip(map::from(std::vector<std::string>{"a", "b"})).to_iter();
      },
      std::vector<Pair>{{1, "a"}, {2, "b"}}, 2);
  check_battery(
      [] {
        return map::from({4, 5, 6}).map([](int x) { return x * 2; }).in_memory_cache().to_iter();
      },
      std::vector<int>{8, 10, 12}, 3);
}

TEST_CASE("map in_memory_cache: size and a missing key pass through / the failed key is not cached",
          "[map][in_memory_cache]") {
  int reads = 0;
  auto cached = map::from({1, 2, 3})
                    .map([&reads](int x) {
                      ++reads;
                      return x;
                    })
                    .in_memory_cache();
  CHECK(cached.size() == 3);
  CHECK_THROWS_AS(cached.get(7), dpipe::KeyError);
  CHECK_THROWS_WITH(cached.get(7), Catch::EndsWith(": index 7 is out of range for 3 elements"));
  CHECK(reads == 0);
  CHECK(cached.get(2) == 3);
  CHECK(reads == 1);
}

}  // namespace

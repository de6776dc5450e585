// Map-style nodes: from (SequenceWrapper), map, to_iter.

#include <string>
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
  CHECK_THROWS_AS(*it, dpipe::KeyError);
}

}  // namespace

// Battery and exact behaviour of from, map, filter, flatmap, unbatch, batch, header, enumerate.

#include <list>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <range/v3/view/filter.hpp>
#include <range/v3/view/iota.hpp>

#include "support/battery.hpp"
#include "support/log_capture.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::testing::check_battery;
using dpipe::testing::collect;

using dpipe::testing::range;

TEST_CASE("from: battery over a vector / a list and a range-v3 view", "[iter][from][battery]") {
  check_battery([] { return iter::from(range(10)); }, range(10), 10);
  check_battery([] { return iter::from(std::list<int>{3, 1, 2}); }, std::vector<int>{3, 1, 2}, 3);
  check_battery(
      [] { return iter::from(ranges::views::iota(0, 10) | ranges::views::filter([](int x) { return x % 3 == 0; })); },
      std::vector<int>{0, 3, 6, 9}, std::nullopt);
}

TEST_CASE("from: keeps its own copy / a view iterates in place", "[iter][from]") {
  std::vector<int> data{1, 2, 3};
  auto copied = iter::from(data);
  auto in_place = iter::from(std::views::all(data));
  data[0] = 100;
  CHECK(collect(copied) == std::vector<int>{1, 2, 3});
  CHECK(collect(in_place) == std::vector<int>{100, 2, 3});
}

TEST_CASE("from: a single-pass range iterates once / then says why it cannot again", "[iter][from]") {
  std::istringstream stream("4 5 6");
  auto pipe = iter::from(std::views::istream<int>(stream));
  CHECK(collect(pipe) == std::vector<int>{4, 5, 6});
  const std::string message = pipe.node().label() +
                              ": the source range is single-pass (an input range that is not a forward range) and "
                              "was already iterated; wrap a container or a forward range to iterate it again";
  CHECK_THROWS_MATCHES(collect(pipe), dpipe::UsageError, Catch::Message(message));
  CHECK(pipe.length() == std::nullopt);
}

TEST_CASE("from: a restored position beyond the data is refused", "[iter][from][state]") {
  auto longer = iter::from(range(10));
  (void)dpipe::testing::take(longer, 8);
  auto blob = dpipe::graph::save_state(longer);
  auto shorter = iter::from(range(5));
  // Same node path and element type: the blob loads, the position does not fit.
  CHECK_THROWS_MATCHES(dpipe::graph::load_state(shorter, blob), dpipe::StateError,
                       Catch::Message(shorter.node().label() + ": saved position 8 is beyond the range's 5 elements"));
}

TEST_CASE("map: battery / and exceptions from fn propagate with their type", "[iter][map][battery]") {
  check_battery([] { return iter::from(range(6)).map([](int x) { return std::to_string(x * 3); }); },
                std::vector<std::string>{"0", "3", "6", "9", "12", "15"}, 6);
  auto failing = iter::from(range(5)).map([](int x) {
    if (x == 3) throw std::out_of_range("three");
    return x;
  });
  auto it = failing.begin();
  CHECK(*it == 0);
  ++it;
  ++it;
  CHECK(*it == 2);
  ++it;
  CHECK_THROWS_MATCHES(*it, std::out_of_range, Catch::Message("three"));  // iterators read lazily
}

TEST_CASE("filter: battery / no length", "[iter][filter][battery]") {
  check_battery([] { return iter::from(range(20)).filter([](int x) { return x % 3 == 1; }); },
                std::vector<int>{1, 4, 7, 10, 13, 16, 19}, std::nullopt);
  auto pipe = iter::from(range(3)).filter([](int) { return true; });
  CHECK_THROWS_MATCHES(pipe.len(), dpipe::LengthError,
                       Catch::Message(pipe.node().label() + " instance doesn't have valid length"));
}

TEST_CASE("flatmap: battery / including state in the middle of an expansion", "[iter][flatmap][battery]") {
  const auto make = [] {
    return iter::from(range(4)).flatmap([](int x) { return std::vector<int>(static_cast<std::size_t>(x), x); });
  };
  check_battery(make, std::vector<int>{1, 2, 2, 3, 3, 3}, std::nullopt);
  auto pipe = make();
  CHECK_THROWS_MATCHES(pipe.len(), dpipe::LengthError,
                       Catch::Message(pipe.node().label() + "'s length relies on the output of its function."));
  // A function returning a non-vector range.
  auto letters = iter::from(std::vector<std::string>{"ab", "", "c"}).flatmap([](std::string s) { return s; });
  CHECK(collect(letters) == std::vector<char>{'a', 'b', 'c'});
}

TEST_CASE("unbatch: battery / inverse of batch", "[iter][unbatch][battery]") {
  check_battery([] { return iter::from(range(7)).batch(3).unbatch(); }, range(7), std::nullopt);
  auto pipe = iter::from(std::vector<std::vector<int>>{{1}, {}, {2, 3}}) | iter::unbatch();
  CHECK(collect(pipe) == std::vector<int>{1, 2, 3});
  CHECK(pipe.node().name() == "unbatch");
}

TEST_CASE("batch: battery with and without drop_last / bad size", "[iter][batch][battery]") {
  check_battery([] { return iter::from(range(7)).batch(3); }, std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}, {6}},
                3);
  check_battery([] { return iter::from(range(7)).batch(3, /*drop_last=*/true); },
                std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}}, 2);
  check_battery([] { return iter::from(range(6)).batch(3, true); }, std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}},
                2);
  CHECK(iter::from(range(0)).batch(4).length() == 0);
  CHECK_THROWS_MATCHES(iter::from(range(3)).batch(0), dpipe::InvalidArgument,
                       Catch::Message("Batch size is required to be larger than 0!"));
}

TEST_CASE("header: battery / stops without reading past the limit", "[iter][header][battery]") {
  check_battery([] { return iter::from(range(10)).header(4); }, std::vector<int>{0, 1, 2, 3}, 4);
  check_battery([] { return iter::from(range(3)).header(); }, range(3), 3);
  int reads = 0;
  auto counted = iter::from(range(10)).map([&reads](int x) {
    ++reads;
    return x;
  });
  CHECK(collect(counted.header(3)) == std::vector<int>{0, 1, 2});
  CHECK(reads == 3);
  CHECK(collect(iter::from(range(5)).header(0)).empty());
}

TEST_CASE("header: an unknown source length is inferred from the limit / with torchdata's warning", "[iter][header]") {
  dpipe::testing::LogCapture log;
  auto pipe = iter::from(range(10)).filter([](int) { return true; }).header(4);
  CHECK(pipe.length() == 4);
  REQUIRE(log.messages().size() == 1);
  CHECK(log.messages()[0] ==
        "The length of this HeaderIterDataPipe is inferred to be equal to its limit.The actual value may be smaller "
        "if the actual length of source_datapipe is smaller than the limit. (" +
            pipe.node().label() + ")");
}

TEST_CASE("enumerate: battery from 0 and from a negative start", "[iter][enumerate][battery]") {
  using Pair = std::pair<std::int64_t, std::string>;
  const auto words = std::vector<std::string>{"a", "b", "c", "d", "e"};
  check_battery([&] { return iter::from(words).enumerate(); },
                std::vector<Pair>{{0, "a"}, {1, "b"}, {2, "c"}, {3, "d"}, {4, "e"}}, 5);
  check_battery([&] { return iter::from(words) | iter::enumerate(-2); },
                std::vector<Pair>{{-2, "a"}, {-1, "b"}, {0, "c"}, {1, "d"}, {2, "e"}}, 5);
}

}  // namespace

namespace {

TEST_CASE("repeat: battery / torchdata's bad count", "[iter][repeat][battery]") {
  check_battery(
      [] {
        return iter::from(std::vector<std::string>{"a", "b"}).repeat(3);
      },
      std::vector<std::string>{"a", "a", "a", "b", "b", "b"}, 6);
  CHECK_THROWS_MATCHES(iter::from(range(3)).repeat(1), dpipe::InvalidArgument,
                       Catch::Message("The number of repetition must be > 1, got 1"));
}

TEST_CASE("in_memory_cache: later iterations do not touch the source", "[iter][in_memory_cache][battery]") {
  int reads = 0;
  auto counted = iter::from(range(5)).map([&reads](int x) {
    ++reads;
    return x;
  });
  auto cached = counted.in_memory_cache();
  CHECK(collect(cached) == range(5));
  CHECK(reads == 5);
  CHECK(collect(cached) == range(5));
  CHECK(reads == 5);
  CHECK(cached.len() == 5);
  check_battery([] { return iter::from(range(6)).in_memory_cache(); }, range(6), 6);
}

TEST_CASE("in_memory_cache: an abandoned first iteration caches nothing / capacity", "[iter][in_memory_cache]") {
  int reads = 0;
  auto cached = iter::from(range(5)).filter([&reads](int) {
    ++reads;
    return true;
  }) | iter::in_memory_cache(3);
  auto it = cached.begin();
  ++it;
  CHECK(reads == 1);
  CHECK_THROWS_MATCHES(
      cached.len(), dpipe::LengthError,
      Catch::Message(cached.node().label() + " instance doesn't have valid length until the cache is loaded."));
  CHECK(collect(cached) == range(5));  // the first complete iteration
  CHECK(reads == 6);
  CHECK(cached.len() == 5);
  CHECK(collect(cached) == range(5));  // 0 and 1 from the source again, 2..4 from the cache
  CHECK(reads == 8);
  // Checkpoints in the second (cached) iteration.
  const auto make = [] {
    auto pipe = iter::from(range(5)).in_memory_cache(3);
    (void)collect(pipe);
    return pipe;
  };
  check_battery(make, range(5), 5);
  CHECK_THROWS_MATCHES(iter::from(range(3)).in_memory_cache(0), dpipe::InvalidArgument,
                       Catch::Message("in_memory_cache capacity must be > 0 elements"));
}

TEST_CASE("fullsync: a non-replicable pass-through in one process", "[iter][fullsync][battery]") {
  check_battery([] { return iter::from(range(5)).fullsync(); }, range(5), std::nullopt);
  auto pipe = iter::from(range(3)) | iter::fullsync(std::chrono::seconds(7));
  CHECK_FALSE(pipe.node().is_replicable());
  CHECK(dynamic_cast<iter::FullSync<int>&>(pipe.node()).timeout() == std::chrono::seconds(7));
}

}  // namespace

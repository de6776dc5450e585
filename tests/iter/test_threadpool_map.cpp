// threadpool_map: a real thread pool. Order kept whatever the completion order, exceptions with
// the element's index, bounded memory, clean stops. Runs under ThreadSanitizer ([concurrency]).

#include <atomic>
#include <cstdint>
#include <latch>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::testing::check_battery;
using dpipe::testing::collect;
using dpipe::testing::range;

TEST_CASE("threadpool_map: battery / order kept", "[iter][threadpool_map][battery][concurrency]") {
  const auto squares = [] {
    std::vector<long> values;
    for (long i = 0; i < 40; ++i) values.push_back(i * i);
    return values;
  }();
  check_battery(
      [] { return iter::from(range(40)).threadpool_map([](int x) { return static_cast<long>(x) * x; }, 3, 5); },
      squares, 40);
}

TEST_CASE("threadpool_map: results come out in input order even when they finish out of order",
          "[iter][threadpool_map][concurrency]") {
  // Element 0 cannot finish before elements 1..3 have: the pool must reorder.
  auto later_done = std::make_shared<std::latch>(3);
  auto pipe = iter::from(range(4)).threadpool_map(
      [later_done](int x) {
        if (x == 0) {
          later_done->wait();
        } else {
          later_done->count_down();
        }
        return x * 10;
      },
      4, 4);
  CHECK(collect(pipe) == std::vector<int>{0, 10, 20, 30});
}

TEST_CASE("threadpool_map: an exception arrives at its element with the index", "[iter][threadpool_map][concurrency]") {
  auto pipe = iter::from(range(20)) | iter::threadpool_map(
                                          [](int x) {
                                            if (x == 5) throw std::out_of_range("five is bad");
                                            return x;
                                          },
                                          3, 4);
  std::vector<int> got;
  try {
    for (int x : pipe) got.push_back(x);
    FAIL("no exception");
  } catch (const dpipe::ElementError& error) {
    CHECK(std::string(error.what()) == pipe.node().label() + ": fn threw on element 5: std::out_of_range: five is bad");
    CHECK_THROWS_MATCHES(std::rethrow_if_nested(error), std::out_of_range, Catch::Message("five is bad"));
  }
  CHECK(got == range(5));
}

TEST_CASE("threadpool_map: reads at most max_in_flight elements ahead", "[iter][threadpool_map][concurrency]") {
  std::atomic<int> read{0};
  auto pipe = iter::from(range(1000))
                  .map([&read](int x) {
                    read.fetch_add(1);
                    return x;
                  })
                  .threadpool_map([](int x) { return x; }, 2, 6);
  int taken = 0;
  for (int x : pipe) {
    CHECK(x == taken);
    ++taken;
    CHECK(read.load() <= taken + 6);
    if (taken == 100) break;
  }
}

TEST_CASE("threadpool_map: stopping mid-stream / a new iteration / destruction",
          "[iter][threadpool_map][concurrency]") {
  auto pipe = iter::from(range(500)).threadpool_map([](int x) { return x + 1; }, 4, 16);
  auto it = pipe.begin();
  for (int i = 0; i < 10; ++i) ++it;
  CHECK(*it == 11);
  std::vector<int> expected;
  for (int i = 1; i <= 500; ++i) expected.push_back(i);
  CHECK(collect(pipe) == expected);  // the new iteration waits out what was in flight
  for (int round = 0; round < 10; ++round) {
    auto running = iter::from(range(10000)).threadpool_map([](int x) { return x; }, 2, 8);
    auto started = running.begin();
    ++started;
  }  // destroyed with elements in flight
  CHECK_THROWS_MATCHES(iter::from(range(3)).threadpool_map([](int x) { return x; }, 0), dpipe::InvalidArgument,
                       Catch::Message("'max_workers' is required to be a positive integer."));
  CHECK_THROWS_MATCHES(iter::from(range(3)).threadpool_map([](int x) { return x; }, 2, 0), dpipe::InvalidArgument,
                       Catch::Message("'scheduled_tasks' is required to be a positive integer."));
}

TEST_CASE("threadpool_map: a checkpoint holding more results than max_in_flight is refused",
          "[iter][threadpool_map][concurrency]") {
  const auto make = [](std::size_t max_in_flight) {
    return iter::from(range(50)).threadpool_map([](int x) { return x * 3; }, 2, max_in_flight);
  };
  auto saved = make(8);
  auto it = saved.begin();
  CHECK(*it == 0);  // the pool took elements 0..7: 7 results wait
  const auto state = dpipe::graph::save_state(saved);

  auto narrower = make(4);
  auto narrower_it = narrower.begin();
  CHECK(*narrower_it == 0);  // elements 0..3 taken
  CHECK_THROWS_MATCHES(dpipe::graph::load_state(narrower, state), dpipe::StateError,
                       Catch::Message(narrower.node().label() + ": 7 saved results exceed max_in_flight 4"));
  // The refused state changed nothing of the node: it still took 4 elements, not the saved 8.
  const auto after = dpipe::StateStore::from_blob(dpipe::graph::save_state(narrower));
  CHECK(dpipe::StateReader(after, "graph/threadpool_map").read<std::uint64_t>("next_index") == 4);
  auto same = make(8);
  dpipe::graph::load_state(same, state);
  std::vector<int> rest;
  for (int x : same) rest.push_back(x);
  std::vector<int> expected;
  for (int x = 1; x < 50; ++x) expected.push_back(x * 3);
  CHECK(rest == expected);
}

}  // namespace

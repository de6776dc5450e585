// OnError: map, filter, flatmap, collate and threadpool_map skip the elements their function throws
// on (logged, counted, within a budget), or raise as before; upstream errors are never skipped.
// The policy behaves the same in process and in worker processes.

#include <algorithm>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"
#include "support/corruption.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::DataLoader2;
using dpipe::OnError;
using dpipe::testing::check_battery;
using dpipe::testing::collect;
using dpipe::testing::epoch;
using dpipe::testing::LogCapture;
using dpipe::testing::range;

/// x * 10, throwing std::runtime_error("bad x") when x % 5 == 3.
int times_ten_failing_on_3_mod_5(int x) {
  if (x % 5 == 3) throw std::runtime_error("bad " + std::to_string(x));
  return x * 10;
}

/// What times_ten_failing_on_3_mod_5 yields over 0..n-1 when failures are skipped.
std::vector<int> times_ten_skipping(int n) {
  std::vector<int> out;
  for (int x = 0; x < n; ++x) {
    if (x % 5 != 3) out.push_back(x * 10);
  }
  return out;
}

dpipe::IterPipe<int> skipping_map(int n, OnError policy = OnError::skip()) {
  return iter::from(range(n)).map(times_ten_failing_on_3_mod_5, policy);
}

TEST_CASE("OnError::skip: map / filter / flatmap / collate / threadpool_map pass the battery",
          "[iter][error_policy][battery]") {
  const LogCapture quiet;
  check_battery([] { return skipping_map(23); }, times_ten_skipping(23), std::nullopt);
  check_battery([] { return iter::from(range(23)) | iter::map(times_ten_failing_on_3_mod_5, OnError::skip()); },
                times_ten_skipping(23), std::nullopt);

  const auto even_failing_on_2_mod_7 = [](const int& x) {
    if (x % 7 == 2) throw std::invalid_argument("odd one");
    return x % 2 == 0;
  };
  check_battery([&] { return iter::from(range(30)).filter(even_failing_on_2_mod_7, OnError::skip()); },
                std::vector<int>{0, 4, 6, 8, 10, 12, 14, 18, 20, 22, 24, 26, 28}, std::nullopt);

  const auto twice_failing_on_1_mod_4 = [](int x) {
    if (x % 4 == 1) throw std::runtime_error("no");
    return std::vector<int>{x, -x};
  };
  check_battery([&] { return iter::from(range(9)).flatmap(twice_failing_on_1_mod_4, OnError::skip()); },
                std::vector<int>{0, 0, 2, -2, 3, -3, 4, -4, 6, -6, 7, -7, 8, -8}, std::nullopt);

  const auto sum_failing_on_7 = [](const std::vector<int>& batch) {
    int sum = 0;
    for (int x : batch) {
      if (x == 7) throw std::runtime_error("seven");
      sum += x;
    }
    return sum;
  };
  check_battery([&] { return iter::from(range(14)).batch(3).collate(sum_failing_on_7, OnError::skip()); },
                std::vector<int>{3, 12, 30, 25}, std::nullopt);

  check_battery(
      [] { return iter::from(range(40)).threadpool_map(times_ten_failing_on_3_mod_5, 3, 5, OnError::skip()); },
      times_ten_skipping(40), std::nullopt);
}

TEST_CASE("OnError::skip: each skipped element is logged with its index and the exception", "[iter][error_policy]") {
  const LogCapture log;
  const auto pipe = skipping_map(10);
  CHECK(collect(pipe) == times_ten_skipping(10));
  const std::string label = pipe.node().label();
  CHECK(log.messages() == std::vector<std::string>{
                              label + ": fn threw on element 3: std::runtime_error: bad 3; skipped (1 in this epoch)",
                              label + ": fn threw on element 8: std::runtime_error: bad 8; skipped (2 in this epoch)"});
  CHECK(pipe.length() == std::nullopt);
}

TEST_CASE("OnError::skip: beyond the budget the next failure is an ElementError nesting the original",
          "[iter][error_policy]") {
  for (const bool threads : {false, true}) {
    INFO((threads ? "threadpool_map" : "map"));
    const LogCapture log;
    const auto pipe = threads
                          ? iter::from(range(30)).threadpool_map(times_ten_failing_on_3_mod_5, 2, 4, OnError::skip(2))
                          : skipping_map(30, OnError::skip(2));
    std::vector<int> seen;
    try {
      for (int x : pipe) seen.push_back(x);
      FAIL("the budget was not enforced");
    } catch (const dpipe::ElementError& error) {
      CHECK(std::string(error.what()) ==
            pipe.node().label() +
                ": fn threw on element 13: std::runtime_error: bad 13; that is 3 failed elements in this epoch, more "
                "than the error budget of 2 (OnError::skip)");
      try {
        std::rethrow_if_nested(error);
        FAIL("nothing nested");
      } catch (const std::runtime_error& original) {
        CHECK(std::string(original.what()) == "bad 13");
      }
    }
    CHECK(seen == std::vector<int>{0, 10, 20, 40, 50, 60, 70, 90, 100, 110, 120});
    CHECK(log.messages().back() == pipe.node().label() +
                                       ": fn threw on element 8: std::runtime_error: bad 8; skipped (2 of the budget "
                                       "of 2 in this epoch)");
  }
}

TEST_CASE("OnError::skip: the budget counts per epoch / a restored epoch keeps its count", "[iter][error_policy]") {
  const LogCapture quiet;
  const auto pipe = skipping_map(10, OnError::skip(2));
  CHECK(collect(pipe) == times_ten_skipping(10));  // two failures: within the budget
  CHECK(collect(pipe) == times_ten_skipping(10));  // and again in the next epoch

  // Saved after both failures (3 and 8) of an epoch of 0..13; the third (13) is over the budget.
  const auto original = skipping_map(14, OnError::skip(2));
  CHECK(dpipe::testing::take(original, 8) == std::vector<int>{0, 10, 20, 40, 50, 60, 70, 90});
  const auto state = dpipe::graph::save_state(original);
  const auto restored = skipping_map(14, OnError::skip(2));
  dpipe::graph::load_state(restored, state);
  std::vector<int> rest;
  CHECK_THROWS_AS(
      [&] {
        for (int x : restored) rest.push_back(x);
      }(),
      dpipe::ElementError);
  CHECK(rest == std::vector<int>{100, 110, 120});
  const auto unlimited = skipping_map(14);
  dpipe::graph::load_state(unlimited, state);
  CHECK(collect(unlimited) == std::vector<int>{100, 110, 120});
}

TEST_CASE("OnError::skip: an upstream exception is not skipped / OnError::raise is today's behaviour",
          "[iter][error_policy]") {
  const auto upstream = iter::from(range(10)).map([](int x) {
    if (x == 4) throw std::out_of_range("upstream");
    return x;
  });
  std::vector<int> seen;
  try {
    for (int x : upstream.map([](int x) { return x + 1; }, OnError::skip())) seen.push_back(x);
    FAIL("the upstream exception was skipped");
  } catch (const std::out_of_range& error) {
    CHECK(std::string(error.what()) == "upstream");
  }
  CHECK(seen == std::vector<int>{1, 2, 3, 4});
  CHECK_THROWS_MATCHES(collect(skipping_map(10, OnError::raise())), std::runtime_error, Catch::Message("bad 3"));
  CHECK(skipping_map(10, OnError::raise()).length() == 10);
}

TEST_CASE("OnError::skip: a skipping filter reads no further than the matches it hands out", "[iter][error_policy]") {
  // So that an ElementError past the budget comes after every match before it. (A filter that
  // raises reads ahead by its pass ratio: see filter.hpp.)
  const LogCapture quiet;
  const auto pipe = iter::from(range(100))
                        .header(100)
                        .filter(
                            [](const int& x) {
                              if (x == 5) throw std::invalid_argument("five");
                              return x % 4 == 0;
                            },
                            OnError::skip())
                        .batch(3);
  auto it = pipe.begin();
  CHECK(*it == std::vector<int>{0, 4, 8});
  CHECK(dpipe::testing::saved_field<std::uint64_t>(pipe, "batch/filter/header/from", "position") == 9);
  CHECK(dpipe::testing::saved_field<std::uint64_t>(pipe, "batch/filter", "index") == 9);
  CHECK(dpipe::testing::saved_field<std::uint64_t>(pipe, "batch/filter", "skipped") == 1);
  CHECK(dpipe::testing::saved_field<std::vector<int>>(pipe, "batch/filter", "pending").empty());
}

TEST_CASE("filter: the matches before the element pred fails on come before the failure", "[iter][error_policy]") {
  for (const OnError policy : {OnError::raise(), OnError::skip(0)}) {
    INFO((policy.skips() ? "skip(0)" : "raise"));
    const auto pipe = iter::from(range(10)).header(10).filter(
        [](const int& x) {
          if (x == 3) throw std::invalid_argument("three");
          return x != 1;
        },
        policy);
    const std::string label = pipe.node().label();
    std::vector<int> out;  // no room: the filter reads into its own buffer first
    pipe.node().reset();
    try {
      (void)pipe.node().pull(out, 5);
      FAIL("pred's failure was not raised");
    } catch (const std::invalid_argument& error) {
      CHECK(!policy.skips());
      CHECK(std::string(error.what()) == "three");
    } catch (const dpipe::ElementError& error) {
      CHECK(policy.skips());
      CHECK(std::string(error.what()) == label +
                                             ": fn threw on element 3: std::invalid_argument: three; that is 1 failed "
                                             "elements in this epoch, more than the error budget of 0 (OnError::skip)");
    }
    CHECK(out == std::vector<int>{0, 2});
  }
}

TEST_CASE("OnError::skip: statistics count the skipped elements", "[iter][error_policy]") {
  const LogCapture quiet;
  const auto pipe = skipping_map(20);
  dpipe::graph::enable_statistics(pipe.ptr());
  CHECK(collect(pipe).size() == 16);
  const auto rows = dpipe::graph::statistics(pipe.ptr());
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].label == pipe.node().label());
  CHECK(rows[0].elements == 16);
  CHECK(rows[0].skipped == 4);
  CHECK(rows[1].skipped == 0);
  CHECK(dpipe::graph::format_statistics(rows).find(" skipped\n") != std::string::npos);
}

/// What a reading service that parallelizes maps makes of `map_node` with ops::ToThreadPoolMap (as
/// examples/custom_reading_service.cpp does): a threadpool_map of 2 threads.
dpipe::IterPipe<int> as_threadpool_map(const dpipe::IterPipe<int>& map_node) {
  REQUIRE(dpipe::find_typed_op<dpipe::ops::ToThreadPoolMap>(map_node.node()) != nullptr);
  return dpipe::graph::as_iter<int>(dpipe::apply_typed_op<dpipe::ops::ToThreadPoolMap>(map_node.ptr(), 2, 4));
}

TEST_CASE("OnError::skip: a skipping map becomes a threadpool_map that skips the same elements",
          "[iter][error_policy][typed_op]") {
  const LogCapture log;
  const auto source = iter::from(range(12));
  const auto parallel = as_threadpool_map(source.map(times_ten_failing_on_3_mod_5, OnError::skip()).tag("expensive"));
  CHECK(parallel.node().name() == "threadpool_map");
  CHECK(parallel.node().tag() == "expensive");
  CHECK(parallel.node().inputs()[0] == source.ptr());
  CHECK(parallel.length() == std::nullopt);
  CHECK(collect(parallel) == times_ten_skipping(12));
  const std::string label = parallel.node().label();
  CHECK(log.messages() == std::vector<std::string>{
                              label + ": fn threw on element 3: std::runtime_error: bad 3; skipped (1 in this epoch)",
                              label + ": fn threw on element 8: std::runtime_error: bad 8; skipped (2 in this epoch)"});
}

TEST_CASE("OnError::skip: a skipping collate becomes a threadpool_map with the same budget",
          "[iter][error_policy][typed_op]") {
  const LogCapture log;
  const auto collated = iter::from(range(12)).collate(times_ten_failing_on_3_mod_5, OnError::skip(1));
  CHECK(collated.node().name() == "collate");
  const auto parallel = as_threadpool_map(collated);
  const std::string label = parallel.node().label();
  std::vector<int> seen;
  CHECK_THROWS_MATCHES(
      [&] {
        for (int x : parallel) seen.push_back(x);
      }(),
      dpipe::ElementError,
      Catch::Message(label +
                     ": fn threw on element 8: std::runtime_error: bad 8; that is 2 failed elements in this epoch, "
                     "more than the error budget of 1 (OnError::skip)"));
  CHECK(seen == std::vector<int>{0, 10, 20, 40, 50, 60, 70});
  CHECK(
      log.messages() ==
      std::vector<std::string>{
          label + ": fn threw on element 3: std::runtime_error: bad 3; skipped (1 of the budget of 1 in this epoch)"});
}

/// The graph of tests/data/skipping_nodes.bin: a skipping map, filter (with a budget), flatmap and
/// collate.
dpipe::IterPipe<int> skipping_nodes() {
  return iter::from(range(60))
      .map(
          [](int x) {
            if (x % 5 == 3) throw std::runtime_error("map " + std::to_string(x));
            return x;
          },
          OnError::skip())
      .filter(
          [](const int& x) {
            if (x % 7 == 6) throw std::runtime_error("filter " + std::to_string(x));
            return x % 2 == 0 || x % 3 == 0;
          },
          OnError::skip(10))
      .flatmap(
          [](int x) {
            if (x % 11 == 10) throw std::runtime_error("flatmap " + std::to_string(x));
            return std::vector<int>{x, x + 100, x + 200};
          },
          OnError::skip())
      .batch(4)
      .collate(
          [](const std::vector<int>& batch) {
            int sum = 0;
            for (int x : batch) sum += x;
            if (sum % 9 == 0) throw std::runtime_error("collate " + std::to_string(sum));
            return sum;
          },
          OnError::skip());
}

TEST_CASE("OnError::skip: a checkpoint of skipping nodes written before map filter and flatmap held the policy",
          "[iter][error_policy][state]") {
  // tests/data/skipping_nodes.bin: graph::save_state of skipping_nodes() after its first three
  // outputs (302, 412, 350), written by dpipe 6926bea, whose skipping nodes were SkipOnError
  // nodes: each saved its element index, its skip count and its pending outputs (the flatmap's
  // five).
  const LogCapture log;
  const auto pipe = skipping_nodes();
  dpipe::graph::load_state(pipe, dpipe::testing::test_data("skipping_nodes.bin"));
  CHECK(collect(pipe) == std::vector<int>{458, 563, 390, 500, 616, 447, 582, 696, 505, 616, 727});

  // Each node goes on with its element index and its count: what it logs is what the rest of
  // the epoch logged when the checkpoint was written.
  const auto logged_by = [&](std::string_view name) {
    const std::string label = dpipe::graph::find_dps(dpipe::graph::traverse_dps(pipe), name).front()->label() + ": ";
    std::vector<std::string> messages;
    for (const auto& message : log.messages()) {
      if (message.starts_with(label)) messages.push_back(message.substr(label.size()));
    }
    return messages;
  };
  CHECK(logged_by("map") ==
        std::vector<std::string>{"fn threw on element 18: std::runtime_error: map 18; skipped (4 in this epoch)",
                                 "fn threw on element 23: std::runtime_error: map 23; skipped (5 in this epoch)",
                                 "fn threw on element 28: std::runtime_error: map 28; skipped (6 in this epoch)",
                                 "fn threw on element 33: std::runtime_error: map 33; skipped (7 in this epoch)",
                                 "fn threw on element 38: std::runtime_error: map 38; skipped (8 in this epoch)",
                                 "fn threw on element 43: std::runtime_error: map 43; skipped (9 in this epoch)",
                                 "fn threw on element 48: std::runtime_error: map 48; skipped (10 in this epoch)",
                                 "fn threw on element 53: std::runtime_error: map 53; skipped (11 in this epoch)",
                                 "fn threw on element 58: std::runtime_error: map 58; skipped (12 in this epoch)"});
  CHECK(logged_by("filter") ==
        std::vector<std::string>{
            "fn threw on element 16: std::runtime_error: filter 20; skipped (2 of the budget of 10 in this epoch)",
            "fn threw on element 22: std::runtime_error: filter 27; skipped (3 of the budget of 10 in this epoch)",
            "fn threw on element 27: std::runtime_error: filter 34; skipped (4 of the budget of 10 in this epoch)",
            "fn threw on element 33: std::runtime_error: filter 41; skipped (5 of the budget of 10 in this epoch)",
            "fn threw on element 44: std::runtime_error: filter 55; skipped (6 of the budget of 10 in this epoch)"});
  CHECK(logged_by("flatmap") ==
        std::vector<std::string>{"fn threw on element 9: std::runtime_error: flatmap 21; skipped (2 in this epoch)",
                                 "fn threw on element 14: std::runtime_error: flatmap 32; skipped (3 in this epoch)",
                                 "fn threw on element 25: std::runtime_error: flatmap 54; skipped (4 in this epoch)"});
  CHECK(logged_by("collate") ==
        std::vector<std::string>{"fn threw on element 10: std::runtime_error: collate 558; skipped (2 in this epoch)",
                                 "fn threw on element 11: std::runtime_error: collate 666; skipped (3 in this epoch)",
                                 "fn threw on element 12: std::runtime_error: collate 477; skipped (4 in this epoch)"});
  // The next epoch is a whole one.
  CHECK(collect(pipe) == std::vector<int>{302, 412, 350, 458, 563, 390, 500, 616, 447, 582, 696, 505, 616, 727});

  // A checkpoint written now has the same fields.
  const auto keys = [](const std::vector<std::byte>& blob) {
    std::vector<std::string> result;
    const auto store = dpipe::StateStore::from_blob(blob);
    for (const auto& field : store.fields()) result.push_back(field.key);
    return result;
  };
  const auto now = skipping_nodes();
  CHECK(dpipe::testing::take(now, 3) == std::vector<int>{302, 412, 350});
  CHECK(keys(dpipe::graph::save_state(now)) == keys(dpipe::testing::test_data("skipping_nodes.bin")));
}

TEST_CASE("OnError::skip: the same elements and the same budget error with worker processes", "[mp][error_policy]") {
  const LogCapture quiet;
  const auto pipe = [](OnError policy) {
    return iter::from(range(40)).sharding_filter().map(times_ten_failing_on_3_mod_5, policy);
  };
  DataLoader2<int> in_process(pipe(OnError::skip()));
  DataLoader2<int> with_workers(pipe(OnError::skip()), dpipe::testing::workers(2));
  CHECK(epoch(in_process) == times_ten_skipping(40));
  // The same elements; a skip shifts which worker's element the round-robin merge takes next, as
  // any filter does.
  auto from_workers = epoch(with_workers);
  std::ranges::sort(from_workers);
  CHECK(from_workers == times_ten_skipping(40));

  // Worker 1 sees 1, 3, 5, ...: its third failure, 23, is element 11 of its share, and comes
  // before worker 0's third (28).
  const auto budgeted_pipe = pipe(OnError::skip(2));
  DataLoader2<int> budgeted(budgeted_pipe, dpipe::testing::workers(2));
  try {
    (void)epoch(budgeted);
    FAIL("the budget was not enforced in the worker");
  } catch (const dpipe::WorkerError& error) {
    CHECK(error.where() == "worker process 1");
    // The map is named; worker 1 had yielded 11 - 2 skipped elements of its share.
    CHECK(error.node() == budgeted_pipe.node().label());
    CHECK(error.element() == std::optional<std::uint64_t>(9));
    CHECK(error.original_type() == "dpipe::ElementError");
    CHECK(error.original_message().ends_with(
        ": fn threw on element 11: std::runtime_error: bad 23; that is 3 failed elements in this epoch, more than the "
        "error budget of 2 (OnError::skip)"));
  }
}

}  // namespace

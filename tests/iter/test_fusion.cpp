// Fused element-wise runs (iter/detail/fusion.hpp): a chain of maps and filters pulled in bulk runs
// as one loop. It must yield exactly what the nodes yield one by one (statistics switch fusion off),
// leave the same state behind for checkpoints, consume nothing past what it hands out from a range
// source, and fall back when the run no longer holds.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <ranges>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"
#include "support/log_capture.hpp"

namespace {

namespace iter = dpipe::iter;
namespace graph = dpipe::graph;

using dpipe::testing::range;
using dpipe::testing::saved_field;

/// x, throwing std::invalid_argument("5 mod 13") when x % 13 == 5.
int throws_on_5_mod_13(int x) {
  if (x % 13 == 5) throw std::invalid_argument("5 mod 13");
  return x;
}

/// Every batch of one iteration.
template <class T>
std::vector<T> batches(const dpipe::IterPipe<T>& pipe) {
  return dpipe::testing::collect(pipe);
}

/// The same batches, with statistics on, which runs every node on its own.
template <class T>
std::vector<T> unfused(const dpipe::IterPipe<T>& pipe) {
  graph::enable_statistics(pipe.ptr());
  auto result = batches(pipe);
  graph::enable_statistics(pipe.ptr(), false);
  return result;
}

TEST_CASE("fusion: runs fed by a range / by a node yield what the nodes yield one by one", "[iter][fusion]") {
  const auto odd_squares = [](const auto& source) {
    return source.map([](int x) { return x * x; }).filter([](int x) { return x % 2 == 1; });
  };
  for (const std::size_t batch : {std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
    INFO("batch " << batch);
    const auto fused_from_range = odd_squares(iter::from(range(1000))).batch(batch);
    const auto fused_from_node = odd_squares(iter::from(range(1000)).header(900)).batch(batch);
    std::vector<std::vector<int>> expected;
    std::vector<int> current;
    for (int x = 0; x < 1000; ++x) {
      if ((x * x) % 2 == 0) continue;
      current.push_back(x * x);
      if (current.size() == batch) expected.push_back(std::exchange(current, {}));
    }
    if (!current.empty()) expected.push_back(current);
    CHECK(batches(fused_from_range) == expected);
    CHECK(unfused(fused_from_range) == expected);
    CHECK(batches(fused_from_node) == unfused(fused_from_node));
  }
  // Long runs: filter after filter, maps between them, a map to another type at the end.
  const auto long_run = iter::from(range(2000))
                            .filter([](int x) { return x % 3 != 0; })
                            .map([](int x) { return x + 7; })
                            .filter([](int x) { return x % 5 != 0; })
                            .map([](int x) { return std::to_string(x); })
                            .batch(17);
  CHECK(batches(long_run) == unfused(long_run));
  // 1, 2, 4, 5, 7, 8, 10, ... (not multiples of 3) + 7 = 8, 9, 11, 12, 14, 15, 17, ..., without multiples of 5.
  CHECK(batches(long_run).front() == std::vector<std::string>{"8", "9", "11", "12", "14", "17", "18", "21", "23", "24",
                                                              "26", "27", "29", "32", "33", "36", "38"});
}

TEST_CASE("fusion: a run fed by a range reads nothing past the element that filled the batch", "[iter][fusion]") {
  auto pipe = iter::from(range(100)).map([](int x) { return x + 1; }).filter([](int x) { return x % 4 == 0; }).batch(3);
  auto it = pipe.begin();
  CHECK(*it == std::vector<int>{4, 8, 12});
  // Sources 3, 7 and 11 filled the batch: the source stands right after 11, nothing waits.
  CHECK(saved_field<std::uint64_t>(pipe, "batch/filter/map/from", "position") == 12);
  CHECK(saved_field<std::vector<int>>(pipe, "batch/filter", "pending").empty());
}

TEST_CASE("fusion: a run that keeps every element fills each batch exactly and reads nothing past it",
          "[iter][fusion]") {
  // A random-access source runs four elements at a time while four fit: every batch size around
  // and across multiples of four, over sources shorter and longer than a batch.
  for (const int length : {0, 1, 3, 4, 5, 8, 13, 64}) {
    for (const std::size_t batch : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{5},
                                    std::size_t{7}, std::size_t{8}, std::size_t{9}}) {
      INFO("length " << length << ", batch " << batch);
      auto kept = iter::from(range(length)).filter([](int) { return true; }).map([](int x) { return x * 10; });
      auto pipe = kept.filter([](int) { return true; }).batch(batch);
      std::vector<std::vector<int>> expected;
      for (int x = 0; x < length; ++x) {
        if (x % static_cast<int>(batch) == 0) expected.emplace_back();
        expected.back().push_back(x * 10);
      }
      CHECK(batches(pipe) == expected);
      auto it = pipe.begin();
      if (length == 0) continue;
      CHECK(*it == expected.front());
      CHECK(saved_field<std::uint64_t>(pipe, "batch/filter/map/filter/from", "position") ==
            std::min<std::size_t>(batch, static_cast<std::size_t>(length)));
    }
  }
}

TEST_CASE("fusion: a range whose end is a test and not a position is never walked to its end", "[iter][fusion]") {
  // take_while is random-access, but what remains of it is known only by testing elements: reading
  // a batch tests the elements it reads, not the rest of the range.
  int tests = 0;
  const auto below_a_million = [&tests](int x) {
    ++tests;
    return x < 1'000'000;
  };
  auto pipe = iter::from(std::views::iota(0) | std::views::take_while(below_a_million))
                  .map([](int x) { return x * 2; })
                  .batch(8);
  auto it = pipe.begin();
  CHECK(*it == std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14});
  CHECK(tests == 8);
  // An endless range has no end to walk to.
  auto endless = iter::from(std::views::iota(0)).map([](int x) { return x + 1; }).batch(4);
  auto first = endless.begin();
  CHECK(*first == std::vector<int>{1, 2, 3, 4});
  ++first;
  CHECK(*first == std::vector<int>{5, 6, 7, 8});
}

TEST_CASE("fusion: the element that fails is consumed and nothing after it", "[iter][fusion]") {
  auto pipe = iter::from(range(50))
                  .map([](int x) {
                    if (x == 5) throw std::invalid_argument("five");
                    return x;
                  })
                  .filter([](int) { return true; })
                  .batch(8);
  std::vector<std::vector<int>> got;
  CHECK_THROWS_MATCHES(
      [&] {
        for (auto& batch : pipe) got.push_back(batch);
      }(),
      std::invalid_argument, Catch::Message("five"));
  CHECK(got.empty());
  CHECK(saved_field<std::uint64_t>(pipe, "batch/filter/map/from", "position") == 6);
}

TEST_CASE("fusion: checkpoints taken fused restore unfused and the other way round", "[iter][fusion][state]") {
  const dpipe::testing::LogCapture quiet;
  // One filter followed by a map, and two filters (the first one's read-ahead, left by a node-by-node
  // pull, must drain before the run can pull as one loop again).
  const std::vector<std::function<dpipe::IterPipe<std::vector<int>>()>> makers{
      [] {
        return iter::from(range(300))
            .filter([](int x) { return x % 7 != 3; })
            .map([](int x) { return x * 2; })
            .batch(5);
      },
      [] {
        return iter::from(range(300))
            .filter([](int x) { return x % 3 != 0; })
            .map([](int x) { return x + 1; })
            .filter([](int x) { return x % 4 != 0; })
            .batch(6);
      },
      // Skipping stages, fed by a range and by a node (the filter's read-ahead, left by a
      // node-by-node pull, goes through the skipping map when the run drains it).
      [] {
        return iter::from(range(300))
            .map(throws_on_5_mod_13, dpipe::OnError::skip())
            .filter(
                [](int x) {
                  if (x % 17 == 4) throw std::invalid_argument("4 mod 17");
                  return x % 3 != 0;
                },
                dpipe::OnError::skip())
            .map([](int x) { return x + 1; })
            .batch(5);
      },
      [] {
        return iter::from(range(300))
            .header(290)
            .filter([](int x) { return x % 3 != 0; })
            .map(throws_on_5_mod_13, dpipe::OnError::skip())
            .batch(6);
      }};
  for (const auto& make : makers) {
    const auto expected = batches(make());
    for (const std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{4}, std::size_t{20}}) {
      for (const bool save_fused : {true, false}) {
        INFO("after " << k << " batches, saved " << (save_fused ? "fused" : "unfused"));
        auto saved = make();
        if (!save_fused) graph::enable_statistics(saved.ptr());
        auto it = saved.begin();
        for (std::size_t i = 0; i < k; ++i) {
          (void)*it;
          ++it;
        }
        const auto blob = graph::save_state(saved);
        auto restored = make();
        if (save_fused) graph::enable_statistics(restored.ptr());
        graph::load_state(restored, blob);
        std::vector<std::vector<int>> rest;
        for (auto& batch : restored) rest.push_back(batch);
        CHECK(rest == std::vector<std::vector<int>>(expected.begin() + static_cast<std::ptrdiff_t>(k), expected.end()));
        // Fused again after an unfused start: the rest of a third copy restored and run fused.
        auto refused = make();
        graph::load_state(refused, blob);
        CHECK(batches(refused) == rest);
      }
    }
  }
}

TEST_CASE("fusion: a run with a skipping stage is still one loop and skips what its node skips", "[iter][fusion]") {
  const dpipe::testing::LogCapture log;
  std::vector<std::string> calls;
  const auto make = [&calls] {
    return iter::from(range(6))
        .map(
            [&calls](int x) {
              calls.push_back("f" + std::to_string(x));
              if (x == 2) throw std::invalid_argument("two");
              return x * 10;
            },
            dpipe::OnError::skip())
        .filter([&calls](int x) {
          calls.push_back("g" + std::to_string(x));
          return x != 40;
        })
        .batch(8);
  };
  const std::vector<std::vector<int>> expected{{0, 10, 30, 50}};
  const auto fused = make();
  CHECK(batches(fused) == expected);
  CHECK(calls == std::vector<std::string>{"f0", "g0", "f1", "g10", "f2", "f3", "g30", "f4", "g40", "f5", "g50"});
  calls.clear();
  const auto by_node = make();
  CHECK(unfused(by_node) == expected);
  CHECK(calls == std::vector<std::string>{"f0", "f1", "f2", "f3", "f4", "f5", "g0", "g10", "g30", "g40", "g50"});
  const auto skipped_by = [](const dpipe::IterPipe<std::vector<int>>& pipe) {
    return graph::find_dps(graph::traverse_dps(pipe), "map").front()->label() +
           ": fn threw on element 2: std::invalid_argument: two; skipped (1 in this epoch)";
  };
  CHECK(log.messages() == std::vector<std::string>{skipped_by(fused), skipped_by(by_node)});
}

TEST_CASE("fusion: past the budget of a skipping stage the run fails where its node fails", "[iter][fusion]") {
  const dpipe::testing::LogCapture quiet;
  for (const bool fused : {true, false}) {
    INFO((fused ? "fused" : "node by node"));
    auto pipe = iter::from(range(30))
                    .map(
                        [](int x) {
                          if (x % 5 == 3) throw std::runtime_error("bad " + std::to_string(x));
                          return x * 10;
                        },
                        dpipe::OnError::skip(2))
                    .filter([](int) { return true; })
                    .batch(4);
    if (!fused) graph::enable_statistics(pipe.ptr());
    const std::string label = graph::find_dps(graph::traverse_dps(pipe), "map").front()->label();
    std::vector<std::vector<int>> got;
    CHECK_THROWS_MATCHES(
        [&] {
          for (auto& batch : pipe) got.push_back(batch);
        }(),
        dpipe::ElementError,
        Catch::Message(label +
                       ": fn threw on element 13: std::runtime_error: bad 13; that is 3 failed elements in this epoch, "
                       "more than the error budget of 2 (OnError::skip)"));
    CHECK(got == std::vector<std::vector<int>>{{0, 10, 20, 40}, {50, 60, 70, 90}});
    CHECK(saved_field<std::uint64_t>(pipe, "batch/filter/map/from", "position") == 14);
    CHECK(saved_field<std::uint64_t>(pipe, "batch/filter/map", "index") == 14);
    CHECK(saved_field<std::uint64_t>(pipe, "batch/filter/map", "skipped") == 2);
  }
}

TEST_CASE("fusion: a run with a replaced node pulls node by node", "[iter][fusion]") {
  // Graph surgery: the map becomes a threadpool_map; the batch node still reads the same filter.
  auto pipe = iter::from(range(200)).map([](int x) { return x * 3; }).filter([](int x) { return x % 2 == 0; }).batch(8);
  const auto expected = batches(pipe);
  const auto map_node = graph::find_dps(graph::traverse_dps(pipe), "map").front();
  (void)graph::replace_dp(graph::traverse_dps(pipe), map_node,
                          dpipe::apply_typed_op<dpipe::ops::ToThreadPoolMap>(map_node, 2, 8));
  CHECK(graph::find_dps(graph::traverse_dps(pipe), "threadpool_map").size() == 1);
  CHECK(batches(pipe) == expected);
}

/// x + 1, throwing std::invalid_argument("3") on 3 when `fails`: one function type for a map that
/// raises and one that skips.
struct PlusOne {
  bool fails = false;
  int operator()(int x) const {
    if (fails && x == 3) throw std::invalid_argument("3");
    return x + 1;
  }
};

TEST_CASE("fusion: a run built without skipping stages does not hold when surgery brings one", "[iter][fusion]") {
  // The run of the filter was built for stages that raise; graph surgery puts a map of the same
  // type that skips in the place of the first map. The run must not apply it without its policy.
  auto first = iter::from(range(8)).map(PlusOne{});
  auto pipe = first.filter([](int x) { return x % 2 == 0; }).batch(3);
  const dpipe::testing::LogCapture log;
  auto skipping =
      std::make_shared<iter::Mapper<int, PlusOne>>(iter::from(range(8)), PlusOne{true}, dpipe::OnError::skip());
  (void)graph::replace_dp(graph::traverse_dps(pipe), first.ptr(), skipping);
  CHECK(batches(pipe) == std::vector<std::vector<int>>{{2, 6, 8}});  // 4 (from 3) skipped
  CHECK(skipping->counters() == nullptr);
}

TEST_CASE("fusion: a stale edge inside a run is refused as node by node", "[iter][fusion]") {
  auto mapped = iter::from(range(100)).map([](int x) { return x + 1; });
  auto filtered = mapped.filter([](int x) { return x % 2 == 0; });
  auto pipe = filtered.batch(4);
  auto it = pipe.begin();
  CHECK(*it == std::vector<int>{2, 4, 6, 8});
  (void)mapped.begin();  // a new iteration of a node inside the run
  CHECK_THROWS_AS(
      [&] {
        ++it;
        (void)*it;
      }(),
      dpipe::UsageError);
}

}  // namespace

// Move-only element types (std::unique_ptr<int>) through every node that needs no copy of an
// element: the battery on each, with a last map that reads the values so the battery can compare
// them (the checkpoints in between hold the move-only elements themselves).

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"
#include "support/log_capture.hpp"

namespace {

namespace iter = dpipe::iter;
using Box = std::unique_ptr<int>;
using dpipe::OnError;
using dpipe::testing::check_battery;
using dpipe::testing::collect;
using dpipe::testing::LogCapture;
using dpipe::testing::range;
using dpipe::testing::seeded;

Box box(int x) { return std::make_unique<int>(x); }
int unbox(const Box& b) { return *b; }
std::vector<int> unbox_all(const std::vector<Box>& boxes) {
  std::vector<int> values;
  for (const auto& b : boxes) values.push_back(*b);
  return values;
}

/// 0 .. n-1 as boxes.
dpipe::IterPipe<Box> boxes(int n) { return iter::from(range(n)).map(box); }

// What needs copies of an element says so at compile time, naming dpipe::copyable_element.
template <class P>
concept can_fork = requires(P pipe) {
  pipe.fork(2);
};
template <class P>
concept can_repeat = requires(P pipe) {
  pipe.repeat(2);
};
template <class P>
concept can_cache = requires(P pipe) {
  pipe.in_memory_cache();
};
template <class P>
concept can_unzip = requires(P pipe) {
  pipe.unzip();
};
template <class P, class Fill>
concept can_zip_longest_with_fill = requires(P pipe, Fill fill) {
  pipe.zip_longest(std::move(fill), dpipe::IterPipe<int>{});
};
static_assert(!dpipe::copyable_element<Box>);
static_assert(dpipe::copyable_element<int>);
static_assert(!can_fork<dpipe::IterPipe<Box>> && can_fork<dpipe::IterPipe<int>>);
static_assert(!can_repeat<dpipe::IterPipe<Box>> && can_repeat<dpipe::IterPipe<int>>);
static_assert(!can_cache<dpipe::IterPipe<Box>> && can_cache<dpipe::IterPipe<int>>);
static_assert(!can_unzip<dpipe::IterPipe<std::tuple<Box, int>>> && can_unzip<dpipe::IterPipe<std::tuple<int, int>>>);
static_assert(!can_zip_longest_with_fill<dpipe::IterPipe<Box>, std::tuple<Box, int>>);
static_assert(can_zip_longest_with_fill<dpipe::IterPipe<int>, std::tuple<int, int>>);
// A container of move-only elements cannot be a source read every epoch; a view making them can.
static_assert(!iter::from_range<std::vector<Box>>);
static_assert(iter::from_range<std::vector<int>>);
static_assert(dpipe::serializable<Box>);

TEST_CASE("move-only elements: from map filter batch with the battery", "[iter][move_only][battery]") {
  check_battery([] { return boxes(10).filter([](const Box& b) { return *b % 2 == 1; }).batch(2).map(unbox_all); },
                std::vector<std::vector<int>>{{1, 3}, {5, 7}, {9}}, std::nullopt);
  check_battery([] { return (boxes(5) | iter::map([](Box b) { return box(*b * 10); })).batch(3).map(unbox_all); },
                std::vector<std::vector<int>>{{0, 10, 20}, {30, 40}}, 2);
  check_battery([] { return boxes(6).batch(4).unbatch().map(unbox); }, range(6), std::nullopt);
  check_battery([] { return boxes(6).sharding_filter().header(4).prefetch(2).map(unbox); }, range(4), 4);
}

TEST_CASE("move-only elements: shuffle and in_batch_shuffle give the order of copyable elements",
          "[iter][move_only][shuffle][battery]") {
  // The order is the one shuffle's own battery checks for the integers (torchdata's).
  check_battery([] { return seeded(boxes(20).shuffle(5), 123).map(unbox); },
                std::vector<int>{0, 2, 5, 3, 6, 7, 10, 8, 4, 13, 9, 15, 11, 1, 18, 16, 12, 14, 17, 19}, 20);
  const auto ints = collect(seeded(iter::from(range(9)).batch(3).in_batch_shuffle(), 4));
  check_battery([] { return seeded(boxes(9).batch(3).in_batch_shuffle(), 4).map(unbox_all); }, ints, 3);
  CHECK(ints != std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}});
}

TEST_CASE("move-only elements: enumerate flatmap map_batches", "[iter][move_only][battery]") {
  check_battery(
      [] { return boxes(3).enumerate(5).map([](std::pair<std::int64_t, Box> p) { return p.first * *p.second; }); },
      std::vector<std::int64_t>{0, 6, 14}, 3);
  check_battery(
      [] {
        return boxes(3)
            .flatmap([](Box b) {
              std::vector<Box> copies;
              for (int i = 0; i < *b; ++i) copies.push_back(box(*b));
              return copies;
            })
            .map(unbox);
      },
      std::vector<int>{1, 2, 2}, std::nullopt);
  check_battery(
      [] {
        return boxes(5)
            .map_batches(
                [](std::vector<Box> batch) {
                  batch.push_back(box(-1));
                  return batch;
                },
                2)
            .map(unbox);
      },
      std::vector<int>{0, 1, -1, 2, 3, -1, 4, -1}, std::nullopt);
}

TEST_CASE("move-only elements: mux demux round_robin_demux zip mux_longest zip_longest", "[iter][move_only][battery]") {
  check_battery([] { return boxes(3).mux(boxes(5)).map(unbox); }, std::vector<int>{0, 0, 1, 1, 2, 2}, 6);
  check_battery([] { return boxes(3).mux_longest(boxes(1)).map(unbox); }, std::vector<int>{0, 0, 1, 2}, 4);
  check_battery(
      [] {
        auto children = boxes(6).demux(2, [](const Box& b) { return static_cast<std::size_t>(*b % 2); });
        return children[1].mux(children[0]).map(unbox);
      },
      std::vector<int>{1, 0, 3, 2, 5, 4}, std::nullopt);
  check_battery(
      [] {
        auto children = boxes(4).round_robin_demux(2);
        return children[0].zip(children[1]).map([](std::tuple<Box, Box> t) {
          return *std::get<0>(t) * 10 + *std::get<1>(t);
        });
      },
      std::vector<int>{1, 23}, 2);
  check_battery(
      [] {
        return boxes(3).zip_longest(boxes(1)).map([](const std::tuple<std::optional<Box>, std::optional<Box>>& t) {
          const int left = **std::get<0>(t);
          return std::get<1>(t).has_value() ? left * 10 + **std::get<1>(t) : -left;
        });
      },
      std::vector<int>{0, -1, -2}, 3);
}

TEST_CASE("move-only elements: OnError::skip on map filter flatmap and threadpool_map",
          "[iter][move_only][error_policy][battery]") {
  const LogCapture quiet;
  const auto fails_on_2 = [](Box b) {
    if (*b == 2) throw std::invalid_argument("bad 2");
    return b;
  };
  check_battery([&] { return boxes(5).map(fails_on_2, OnError::skip()).map(unbox); }, std::vector<int>{0, 1, 3, 4},
                std::nullopt);
  check_battery([&] { return boxes(5).threadpool_map(fails_on_2, 2, 4, OnError::skip()).map(unbox); },
                std::vector<int>{0, 1, 3, 4}, std::nullopt);
  check_battery(
      [] {
        return boxes(5)
            .filter(
                [](const Box& b) {
                  if (*b == 3) throw std::invalid_argument("bad 3");
                  return *b != 0;
                },
                OnError::skip())
            .map(unbox);
      },
      std::vector<int>{1, 2, 4}, std::nullopt);
  check_battery(
      [] {
        return boxes(4)
            .flatmap(
                [](Box b) {
                  if (*b == 1) throw std::invalid_argument("bad 1");
                  std::vector<Box> two;
                  two.push_back(box(*b));
                  two.push_back(std::move(b));
                  return two;
                },
                OnError::skip())
            .map(unbox);
      },
      std::vector<int>{0, 0, 2, 2, 3, 3}, std::nullopt);
}

TEST_CASE("move-only elements: a clone of a node holding some starts afresh", "[iter][move_only][graph]") {
  auto pipe = seeded(boxes(6).shuffle(3), 1);
  auto it = pipe.begin();
  ++it;  // the shuffle buffer holds boxes now
  auto copy = dpipe::graph::clone(pipe);
  seeded(copy, 1);
  std::vector<int> values;
  for (auto& b : copy) values.push_back(*b);
  std::vector<int> original;
  for (auto& b : seeded(boxes(6).shuffle(3), 1)) original.push_back(*b);
  CHECK(values == original);
}

}  // namespace

// Battery and exact behaviour of zip, concat, mux, fork, demux and cycle.

#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"
#include "support/log_capture.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::testing::check_battery;
using dpipe::testing::collect;

using dpipe::testing::range;

TEST_CASE("zip: battery / stops with the shortest input", "[iter][zip][battery]") {
  using Triple = std::tuple<int, std::string, int>;
  check_battery(
      [] {
        return iter::from(range(0, 5))
            .zip(iter::from(std::vector<std::string>{"a", "b", "c"}), iter::from(range(10, 20)));
      },
      std::vector<Triple>{{0, "a", 10}, {1, "b", 11}, {2, "c", 12}}, 3);
  auto unsized = iter::from(range(0, 3)).filter([](int) { return true; });
  CHECK(iter::from(range(0, 3)).zip(unsized).length() == std::nullopt);
  auto piped = iter::from(range(0, 2)) | iter::zip(iter::from(range(5, 9)));
  CHECK(collect(piped) == std::vector<std::tuple<int, int>>{{0, 5}, {1, 6}});
}

TEST_CASE("concat: battery / inputs start only when reached", "[iter][concat][battery]") {
  check_battery([] { return iter::from(range(0, 3)).concat(iter::from(range(0, 0)), iter::from(range(10, 12))); },
                std::vector<int>{0, 1, 2, 10, 11}, 5);
  int second_reads = 0;
  auto second = iter::from(range(10, 12)).map([&](int x) {
    ++second_reads;
    return x;
  });
  auto pipe = iter::from(range(0, 3)) | iter::concat(second);
  auto it = pipe.begin();
  ++it;
  ++it;
  CHECK(second_reads == 0);
  CHECK(collect(pipe) == std::vector<int>{0, 1, 2, 10, 11});
  CHECK(second_reads == 2);
}

TEST_CASE("mux: battery / drops the partial last round (torchdata's doc example)", "[iter][mux][battery]") {
  check_battery([] { return iter::from(range(0, 3)).mux(iter::from(range(10, 15)), iter::from(range(20, 25))); },
                std::vector<int>{0, 10, 20, 1, 11, 21, 2, 12, 22}, 9);
  check_battery([] { return iter::from(range(0, 4)).mux(iter::from(range(10, 12))); }, std::vector<int>{0, 10, 1, 11},
                4);
}

TEST_CASE("fork: battery through zip / each child yields everything", "[iter][fork][battery]") {
  check_battery(
      [] {
        auto children = iter::from(range(0, 6)).fork(3, 2);
        return children[0].zip(children[1].map([](int x) { return x * 10; }), children[2]);
      },
      std::vector<std::tuple<int, int, int>>{{0, 0, 0}, {1, 10, 1}, {2, 20, 2}, {3, 30, 3}, {4, 40, 4}, {5, 50, 5}}, 6);
  auto children = iter::from(range(0, 4)).fork(2);
  CHECK(collect(children[0]) == range(0, 4));  // buffers all four for child 1
  CHECK(collect(children[1]) == range(0, 4));
  CHECK(children[1].length() == 4);
}

TEST_CASE("fork: state saved with a child ahead restores its buffer", "[iter][fork][state]") {
  const auto make = [] {
    auto children = iter::from(range(0, 8)).fork(2, 5);
    return children[0].concat(children[1]);  // child 0 runs ahead of child 1 by up to 5... then overflows
  };
  auto ok = [] {
    auto children = iter::from(range(0, 4)).fork(2, 5);
    return children[0].concat(children[1]);
  };
  check_battery(ok, std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}, 8);
  auto overflowing = make();
  auto it = overflowing.begin();
  for (int i = 0; i < 4; ++i) ++it;
  CHECK(*it == 4);
  ++it;
  const auto container = overflowing.node().inputs()[0]->inputs()[0];
  CHECK_THROWS_MATCHES(
      *it, dpipe::BufferOverflowError,
      Catch::Message("ForkerIterDataPipe buffer overflow,buffer size 5 is insufficient. (" + container->label() +
                     ": child 0 would run 6 elements ahead of the slowest child; raise buffer_size "
                     "or read the children more evenly)"));
}

TEST_CASE("fork: one instance returns the source / zero is an error", "[iter][fork]") {
  auto source = iter::from(range(0, 3));
  const auto single = source.fork(1);
  REQUIRE(single.size() == 1);
  CHECK(single[0].ptr() == source.ptr());
  CHECK_THROWS_MATCHES(source.fork(0), dpipe::InvalidArgument,
                       Catch::Message("Expected `num_instances` larger than 0, but 0 is found"));
}

TEST_CASE("fork: restarting a child mid-iteration resets all / warns / and invalidates siblings", "[iter][fork]") {
  dpipe::testing::LogCapture log;
  auto children = iter::from(range(0, 5)).fork(2);
  auto first = children[0].begin();
  auto second = children[1].begin();
  CHECK(*first == 0);
  CHECK(*second == 0);
  ++first;
  auto restarted = children[0].begin();  // child 0 again: a new generation
  CHECK(*restarted == 0);
  const auto container = children[0].node().inputs()[0];
  REQUIRE(log.messages().size() == 1);
  CHECK(log.messages()[0] ==
        "Some child DataPipes are not exhausted when __iter__ is called. We are resetting the buffer and each child "
        "DataPipe will read from the start again. (" +
            container->label() + ")");
  ++second;
  CHECK_THROWS_MATCHES(
      *second, dpipe::UsageError,
      Catch::Message("This iterator has been invalidated, because a new iterator has been created from "
                     "one of the ChildDataPipes of " +
                     container->label() +
                     ".\nFor feedback regarding this single iterator per IterDataPipe constraint, feel "
                     "free to comment on this issue: https://github.com/pytorch/data/issues/45."));
  // Child 1 joins the new generation without another reset; child 0 finishes it.
  CHECK(collect(children[1]) == range(0, 5));
  std::vector<int> rest;
  for (++restarted; restarted != children[0].end(); ++restarted) rest.push_back(*restarted);
  CHECK(rest == range(1, 5));
  // Epochs after complete reads do not warn.
  CHECK(collect(children[0]) == range(0, 5));
  CHECK(collect(children[1]) == range(0, 5));
  CHECK(log.messages().size() == 1);
}

TEST_CASE("demux: battery through mux / classifier errors and drop_none", "[iter][demux][battery]") {
  check_battery(
      [] {
        auto children = iter::from(range(0, 10)).demux(2, [](const int& x) { return x % 2; });
        return children[0].mux(children[1].map([](int x) { return -x; }));
      },
      std::vector<int>{0, -1, 2, -3, 4, -5, 6, -7, 8, -9}, std::nullopt);
  auto children = iter::from(range(0, 7))
                      .demux(
                          3,
                          [](const int& x) -> std::optional<int> {
                            if (x == 4) return std::nullopt;
                            return x % 3;
                          },
                          /*drop_none=*/true);
  CHECK(collect(children[2]) == std::vector<int>{2, 5});
  CHECK(collect(children[0]) == std::vector<int>{0, 3, 6});
  CHECK(collect(children[1]) == std::vector<int>{1});

  auto strict = iter::from(range(0, 3)).demux(2, [](const int& x) -> std::optional<int> {
    if (x == 1) return std::nullopt;
    return x;
  });
  auto it = strict[0].begin();
  CHECK(*it == 0);
  ++it;
  CHECK_THROWS_MATCHES(*it, dpipe::InvalidArgument,
                       Catch::Message("Output of the classification fn should be between 0 and 1. None is returned."));
  auto out_of_range = iter::from(range(0, 3)).demux(2, [](const int& x) { return x - 1; });
  CHECK_THROWS_MATCHES(collect(out_of_range[1]), dpipe::InvalidArgument,
                       Catch::Message("Output of the classification fn should be between 0 and 1. -1 is returned."));
  CHECK_THROWS_MATCHES(iter::from(range(0, 3)).demux(0, [](const int& x) { return x; }), dpipe::InvalidArgument,
                       Catch::Message("Expected `num_instances` larger than 0, but 0 is found"));
}

TEST_CASE("demux: a lagging child overflows the buffer instead of growing it", "[iter][demux]") {
  auto children = iter::from(range(0, 20))
                      .demux(
                          2, [](const int& x) { return x < 10 ? 1 : 0; }, false, 4);
  const auto container = children[0].node().inputs()[0];
  // Child 0's first element is 10: elements 0..9 must wait for child 1, and only 4 may.
  CHECK_THROWS_MATCHES(*children[0].begin(), dpipe::BufferOverflowError,
                       Catch::Message("DemultiplexerIterDataPipe buffer overflow, buffer size 4 is insufficient. (" +
                                      container->label() +
                                      ": child 1 is not being read; raise buffer_size or read the children more "
                                      "evenly)"));
  auto roomy = iter::from(range(0, 20))
                   .demux(
                       2, [](const int& x) { return x < 10 ? 1 : 0; }, false, 10);
  CHECK(collect(roomy[0]) == range(10, 20));
  CHECK(collect(roomy[1]) == range(0, 10));
}

TEST_CASE("cycle: battery with a count / forever / empty source ends", "[iter][cycle][battery]") {
  check_battery([] { return iter::from(range(0, 3)).cycle(3); }, std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1, 2}, 9);
  check_battery([] { return iter::from(range(0, 3)).cycle(0); }, std::vector<int>{}, 0);
  check_battery([] { return iter::from(range(0, 3)).cycle().header(7); }, std::vector<int>{0, 1, 2, 0, 1, 2, 0}, 7);
  auto forever = iter::from(range(0, 3)).cycle();
  CHECK_THROWS_MATCHES(forever.len(), dpipe::LengthError,
                       Catch::Message("This " + forever.node().label() +
                                      " instance cycles forever, and therefore doesn't have valid length"));
  CHECK(collect(iter::from(range(0, 0)).cycle()).empty());
}

}  // namespace

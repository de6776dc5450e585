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

namespace {

TEST_CASE("round_robin_demux: torchdata's T52 / battery / lengths / errors", "[iter][round_robin_demux][battery]") {
  auto children = iter::from(range(0, 23)).round_robin_demux(3);
  REQUIRE(children.size() == 3);
  CHECK(collect(children[0]) == std::vector<int>{0, 3, 6, 9, 12, 15, 18, 21});
  CHECK(collect(children[1]) == std::vector<int>{1, 4, 7, 10, 13, 16, 19, 22});
  CHECK(collect(children[2]) == std::vector<int>{2, 5, 8, 11, 14, 17, 20});
  CHECK(children[0].len() == 8);
  CHECK(children[1].len() == 8);
  CHECK(children[2].len() == 7);
  check_battery(
      [] {
        auto c = iter::from(range(0, 10)).round_robin_demux(2);
        return c[0].concat(c[1]);
      },
      std::vector<int>{0, 2, 4, 6, 8, 1, 3, 5, 7, 9}, 10);
  CHECK_THROWS_MATCHES(iter::from(range(0, 3)).round_robin_demux(0), dpipe::InvalidArgument,
                       Catch::Message("Expected `num_instaces` larger than 0, but 0 is found"));
  dpipe::testing::LogCapture log;
  auto source = iter::from(range(0, 3));
  const auto single = source.round_robin_demux(1);
  REQUIRE(single.size() == 1);
  CHECK(single[0].ptr() == source.ptr());
  REQUIRE(log.messages().size() == 1);
  CHECK(log.messages()[0] ==
        "The operation of `round_robin_demux` with `num_instances=1` is an no-op and returns the "
        "provided `datapipe` in a list directly (" +
            source.node().label() + ")");
}

TEST_CASE("round_robin_demux: a lagging child overflows the buffer", "[iter][round_robin_demux]") {
  auto children = iter::from(range(0, 10)).round_robin_demux(2, 3);
  const auto container = children[0].node().inputs()[0];
  auto first = children[0].begin();
  for (int i = 0; i < 4; ++i) ++first;  // reads 0, 2, 4, 6; elements 1, 3, 5 wait for child 1
  CHECK_THROWS_MATCHES(*first, dpipe::BufferOverflowError,
                       Catch::Message("DemultiplexerIterDataPipe buffer overflow, buffer size 3 is insufficient. (" +
                                      container->label() +
                                      ": child 1 is not being read; raise buffer_size or read the children more "
                                      "evenly)"));
}

TEST_CASE("zip_longest: optionals or fill values until every input ends", "[iter][zip_longest][battery]") {
  using Optionals = std::tuple<std::optional<int>, std::optional<std::string>>;
  check_battery([] { return iter::from(range(0, 3)).zip_longest(iter::from(std::vector<std::string>{"a"})); },
                std::vector<Optionals>{{0, "a"}, {1, std::nullopt}, {2, std::nullopt}}, 3);
  check_battery(
      [] {
        return iter::from(range(0, 1)).zip_longest(std::tuple<int, int>{-1, -2}, iter::from(range(10, 13)));
      },
      std::vector<std::tuple<int, int>>{{0, 10}, {-1, 11}, {-1, 12}}, 3);
  CHECK(collect(iter::from(range(0, 0)).zip_longest(iter::from(range(0, 0)))).empty());
  auto piped = iter::from(range(0, 1)) | iter::zip_longest(iter::from(range(5, 7)));
  CHECK(collect(piped).size() == 2);
}

TEST_CASE("mux_longest: round robin that skips exhausted inputs", "[iter][mux_longest][battery]") {
  check_battery(
      [] { return iter::from(range(0, 3)).mux_longest(iter::from(range(10, 15)), iter::from(range(20, 21))); },
      std::vector<int>{0, 10, 20, 1, 11, 2, 12, 13, 14}, 9);
  check_battery([] { return iter::from(range(0, 0)).mux_longest(iter::from(range(0, 0))); }, std::vector<int>{}, 0);
}

TEST_CASE("unzip: tuple columns and sequence columns share a fork buffer", "[iter][unzip][battery]") {
  check_battery(
      [] {
        auto [numbers, names] =
            iter::from(range(0, 4)).map([](int x) { return std::make_pair(x, "n" + std::to_string(x)); }).unzip();
        return numbers.zip(names);
      },
      std::vector<std::tuple<int, std::string>>{{0, "n0"}, {1, "n1"}, {2, "n2"}, {3, "n3"}}, 4);
  check_battery(
      [] {
        auto columns = iter::from(range(0, 4))
                           .map([](int x) {
                             return std::vector<int>{x, -x, x * x};
                           })
                           .unzip(3, 10, {1});
        return columns[0].zip(columns[1]);
      },
      std::vector<std::tuple<int, int>>{{0, 0}, {1, 1}, {2, 4}, {3, 9}}, 4);
  auto short_rows = iter::from(range(0, 2)).map([](int x) { return std::vector<int>{x}; }).unzip(2);
  CHECK_THROWS_MATCHES(collect(short_rows[1]), dpipe::InvalidArgument,
                       Catch::Message("unzip: an element has 1 items, so column 1 does not exist"));
  CHECK_THROWS_MATCHES(iter::from(range(0, 2)).map([](int x) { return std::vector<int>{x}; }).unzip(2, 10, {0, 1}),
                       dpipe::InvalidArgument,
                       Catch::Message("All instances are being filtered out in UnZipperIterDataPipe. Please checkthe "
                                      "input `sequence_length` and `columns_to_skip`."));
  CHECK(short_rows[0].node().name() == "unzip_child");
}

TEST_CASE("demux / unzip: read one child after the other / the checkpoints hold the buffered elements",
          "[iter][demux][unzip][battery]") {
  // Reading child 0 to its end buffers everything child 1 will yield: the battery's saves at 1
  // and 4 elements restore a non-empty buffer.
  check_battery(
      [] {
        auto children = iter::from(range(0, 10))
                            .demux(
                                2, [](const int& x) { return x % 2; }, false, 10);
        return children[0].concat(children[1]);
      },
      std::vector<int>{0, 2, 4, 6, 8, 1, 3, 5, 7, 9}, std::nullopt);
  check_battery(
      [] {
        auto [plus, minus] = iter::from(range(0, 5)).map([](int x) { return std::make_tuple(x, -x); }).unzip(10);
        return plus.concat(minus);
      },
      std::vector<int>{0, 1, 2, 3, 4, 0, -1, -2, -3, -4}, 10);
}

TEST_CASE("unzip: an unread column fills the buffer and overflows", "[iter][unzip]") {
  auto [left, right] = iter::from(range(0, 10)).map([](int x) { return std::make_tuple(x, x); }).unzip(4);
  (void)right;
  auto it = left.begin();
  for (int i = 0; i < 4; ++i) ++it;
  const auto container = left.node().inputs()[0];
  CHECK_THROWS_MATCHES(
      *it, dpipe::BufferOverflowError,
      Catch::Message("ForkerIterDataPipe buffer overflow,buffer size 4 is insufficient. (" + container->label() +
                     ": child 0 would run 5 elements ahead of the slowest child; raise buffer_size or "
                     "read the children more evenly)"));
}

TEST_CASE("zip of forks: a child that reads faster than its sibling overflows", "[iter][fork][zip]") {
  auto children = iter::from(range(0, 100)).fork(2, 5);
  auto zipped = children[0].zip(children[1].filter([](int x) { return x % 3 == 0; }));
  std::vector<std::tuple<int, int>> got;
  const auto container = children[0].node().inputs()[0];
  CHECK_THROWS_MATCHES(
      [&] {
        for (auto& pair : zipped) got.push_back(pair);
      }(),
      dpipe::BufferOverflowError,
      Catch::Message("ForkerIterDataPipe buffer overflow,buffer size 5 is insufficient. (" + container->label() +
                     ": child 1 would run 6 elements ahead of the slowest child; raise buffer_size or read the "
                     "children more evenly)"));
  // Each round the filtered child reads three elements to the plain child's one: the fourth round
  // would put it 6 elements ahead.
  CHECK(got == std::vector<std::tuple<int, int>>{{0, 0}, {1, 3}, {2, 6}});
}

}  // namespace

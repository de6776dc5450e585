// prefetch: a real background thread. Order, exceptions, stopping mid-stream, pause/resume,
// checkpoints with elements read ahead. Runs under ThreadSanitizer in CI ([concurrency]).

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::testing::check_battery;
using dpipe::testing::collect;

using dpipe::testing::range;

TEST_CASE("prefetch: battery / order kept / nested prefetch", "[iter][prefetch][battery][concurrency]") {
  check_battery([] { return iter::from(range(100)).prefetch(5); }, range(100), 100);
  check_battery([] { return iter::from(range(50)).prefetch(3).map([](int x) { return x * 2; }).prefetch(); },
                [] {
                  std::vector<int> doubled;
                  for (int i = 0; i < 50; ++i) doubled.push_back(i * 2);
                  return doubled;
                }(),
                50);
  check_battery([] { return iter::from(range(1000)).prefetch(64).batch(10); },
                [] {
                  std::vector<std::vector<int>> batches;
                  for (int b = 0; b < 100; ++b) {
                    batches.emplace_back();
                    for (int i = 0; i < 10; ++i) batches.back().push_back(b * 10 + i);
                  }
                  return batches;
                }(),
                100);
}

TEST_CASE("prefetch: stop after 100 elements / then a full iteration (torchdata T53)",
          "[iter][prefetch][concurrency]") {
  auto pipe = iter::from(range(5000)).prefetch(10);
  int seen = 0;
  for (int x : pipe) {
    CHECK(x == seen);
    if (++seen == 100) break;
  }
  CHECK(collect(pipe) == range(5000));
  CHECK(pipe.len() == 5000);
}

TEST_CASE("prefetch: an exception upstream reaches the consumer after the elements before it",
          "[iter][prefetch][concurrency]") {
  struct Oops : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  auto pipe = iter::from(range(10))
                  .map([](int x) {
                    if (x == 6) throw Oops("oops at 6");
                    return x;
                  })
                  .prefetch(4);
  std::vector<int> got;
  CHECK_THROWS_MATCHES(
      [&] {
        for (int x : pipe) got.push_back(x);
      }(),
      Oops, Catch::Message("oops at 6"));
  CHECK(got == range(6));
  CHECK(collect(pipe.header(3)) == range(3));  // a new iteration works again
}

TEST_CASE("prefetch: reads at most buffer_size ahead", "[iter][prefetch][concurrency]") {
  std::atomic<int> produced{0};
  auto pipe = iter::from(range(100))
                  .map([&](int x) {
                    produced.fetch_add(1);
                    return x;
                  })
                  .prefetch(5);
  auto it = pipe.begin();
  CHECK(*it == 0);
  pipe.node().stop_background();  // joins the producer: its count is final
  // One handed out, up to five buffered.
  CHECK(produced.load() <= 6);
  CHECK(produced.load() >= 1);
  pipe.node().start_background();
  int expected = 0;
  for (; it != pipe.end(); ++it) CHECK(*it == expected++);
  CHECK(expected == 100);
}

TEST_CASE("prefetch: stopping the thread keeps what was read ahead / restarting continues",
          "[iter][prefetch][concurrency]") {
  auto pipe = iter::from(range(30)).prefetch(8);
  auto it = pipe.begin();
  for (int i = 0; i < 10; ++i) ++it;
  pipe.node().stop_background();
  pipe.node().stop_background();  // idempotent
  pipe.node().start_background();
  pipe.node().start_background();
  std::vector<int> rest;
  for (; it != pipe.end(); ++it) rest.push_back(*it);
  std::vector<int> expected(20);
  std::iota(expected.begin(), expected.end(), 10);
  CHECK(rest == expected);
}

TEST_CASE("prefetch: destroying a running pipeline stops its thread", "[iter][prefetch][concurrency]") {
  for (int round = 0; round < 20; ++round) {
    auto pipe = iter::from(range(100000)).prefetch(16);
    auto it = pipe.begin();
    ++it;
  }  // the producer is blocked on a full buffer here; the destructor must wake and join it
  CHECK(collect(iter::from(range(3)).prefetch(1)) == range(3));
}

TEST_CASE("prefetch: the thread is joined before the consumer sees the end / or the exception",
          "[iter][prefetch][concurrency]") {
  // A loader that forks its worker processes next must not fork while this thread exits: under a
  // sanitizer's runtime the child can inherit the runtime's locks held. A node whose thread runs
  // refuses to save its state, so saving without stop_background() proves the thread was joined.
  const auto saves_while_started = [](auto& pipe) {
    dpipe::StateStore store;
    dpipe::StateWriter writer(store, "prefetch");
    (void)pipe.node().save_state(writer);
  };
  auto pipe = iter::from(range(20)).prefetch(4);
  CHECK(collect(pipe) == range(20));
  CHECK_NOTHROW(saves_while_started(pipe));
  auto failing = iter::from(range(10))
                     .map([](int x) {
                       if (x == 7) throw std::runtime_error("bad 7");
                       return x;
                     })
                     .prefetch(3);
  CHECK_THROWS_WITH(collect(failing), "bad 7");
  CHECK_NOTHROW(saves_while_started(failing));
}

TEST_CASE("prefetch: bad buffer size", "[iter][prefetch]") {
  CHECK_THROWS_MATCHES(iter::from(range(3)).prefetch(0), dpipe::InvalidArgument,
                       Catch::Message("'buffer_size' is required to be a positive integer."));
}

}  // namespace

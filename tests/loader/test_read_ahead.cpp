// DataLoader2 reads small, quick elements from its pipeline in runs (detail::ReadAhead) and hands
// them out one by one: the runs' lengths, checkpoints that hold elements read ahead, exceptions,
// limits, pauses and stale iterators in the middle of a run, and the elements that are never read
// ahead (without a Serializer, or large).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"
#include "support/loader.hpp"

namespace {

using dpipe::DataLoader2;
using dpipe::InProcessReadingService;
using dpipe::detail::ReadAhead;
using dpipe::testing::range;
namespace iter = dpipe::iter;
using std::chrono::nanoseconds;

/// An element type without a Serializer.
struct Opaque {
  std::unique_ptr<int> value;
};
static_assert(!dpipe::serializable<Opaque>);

/// Whether a loader checkpoint holds elements read ahead.
bool holds_read_ahead(const std::vector<std::byte>& blob) {
  return dpipe::StateStore::from_blob(blob).find("loader:read_ahead") != nullptr;
}

/// The elements a loader yields from `it` to the end of its epoch.
template <class T, class Iterator, class Loader>
std::vector<T> drain(Iterator& it, Loader& loader) {
  std::vector<T> out;
  for (; it != loader.end(); ++it) out.push_back(*it);
  return out;
}

TEST_CASE("ReadAhead: runs double while quick and small / drop at once / are retimed", "[loader][read_ahead]") {
  ReadAhead runs(true);
  CHECK(runs.length() == 1);
  std::vector<std::size_t> lengths;
  for (int i = 0; i < 9; ++i) {
    REQUIRE(runs.timed());
    runs.ran(runs.length(), nanoseconds(10 * runs.length()), 8);  // 10 ns and 8 bytes an element
    lengths.push_back(runs.length());
  }
  CHECK(lengths == std::vector<std::size_t>{2, 4, 8, 16, 32, 64, 128, 256, 256});
  // At the longest run, one run in 16 is timed.
  std::size_t timed = 0;
  for (int i = 0; i < 32; ++i) {
    if (runs.timed()) {
      ++timed;
      runs.ran(256, nanoseconds(2560), 8);
    } else {
      runs.ran_untimed();
    }
  }
  CHECK(timed == 2);
  // Elements that got slow: the run shrinks at once to what fits 20 us (4 us each: 5).
  runs.ran(256, nanoseconds(256 * 4000), 8);
  CHECK(runs.length() == 5);
  // A run slower than 20 us on its own: one element at a time.
  runs.ran(5, nanoseconds(5 * 30000), 8);
  CHECK(runs.length() == 1);
  // Large elements: what fits 64 KiB.
  ReadAhead large(true);
  large.ran(1, nanoseconds(10), 40000);
  CHECK(large.length() == 1);
  large.ran(1, nanoseconds(10), 16 << 10);
  CHECK(large.length() == 2);
  large.ran(2, nanoseconds(20), 16 << 10);
  CHECK(large.length() == 4);
  large.ran(4, nanoseconds(40), 16 << 10);
  CHECK(large.length() == 4);
  // Not allowed: never timed, one element at a time.
  ReadAhead never(false);
  CHECK_FALSE(never.timed());
  CHECK(never.length() == 1);
}

/// What a loader from `make_loader()` yields in its first epoch (seeded with `seed`) when it is
/// checkpointed after `taken` elements and a new loader continues from the checkpoint; counts the
/// checkpoints that held elements read ahead in `with_read_ahead`.
template <class MakeLoader>
std::vector<int> interrupted_epoch(const MakeLoader& make_loader, std::uint64_t seed, std::size_t taken,
                                   std::size_t& with_read_ahead) {
  auto loader = make_loader();
  loader.seed(seed);
  auto it = loader.begin();
  std::vector<int> got;
  for (std::size_t i = 0; i < taken; ++i, ++it) got.push_back(*it);
  CHECK(loader.elements_in_epoch() == taken);
  const auto blob = loader.state_dict();
  if (holds_read_ahead(blob)) ++with_read_ahead;
  loader.shutdown();
  auto resumed = make_loader();
  resumed.load_state_dict(blob);
  auto rest = resumed.begin();
  const auto tail = drain<int>(rest, resumed);
  got.insert(got.end(), tail.begin(), tail.end());
  return got;
}

TEST_CASE("DataLoader2: checkpoints taken while elements are read ahead restore exactly", "[loader][read_ahead]") {
  const auto make = [] {
    return DataLoader2<int>(iter::from(range(3000)).shuffle(100).map([](int x) { return x * 3; }));
  };
  auto whole = make();
  whole.seed(5);
  const auto expected = dpipe::testing::epoch(whole);
  REQUIRE(expected.size() == 3000);
  // Checkpoints after 1000 + k elements, k = 0..63: with runs of up to 256, some of them hold
  // elements read ahead; each restores into a loader that yields exactly the rest.
  std::size_t with_read_ahead = 0;
  for (std::size_t k = 0; k < 64; ++k) CHECK(interrupted_epoch(make, 5, 1000 + k, with_read_ahead) == expected);
  CHECK(with_read_ahead > 0);
}

TEST_CASE("DataLoader2: a checkpoint of worker processes and elements read ahead restores exactly",
          "[loader][read_ahead][multiprocessing]") {
  const auto make = [] {
    return DataLoader2<int>(iter::from(range(4000)).shuffle(50).sharding_filter(),
                            dpipe::MultiProcessingReadingService({.num_workers = 2}));
  };
  auto whole = make();
  whole.seed(2);
  const auto expected = dpipe::testing::epoch(whole);
  REQUIRE(expected.size() == 4000);
  std::size_t with_read_ahead = 0;
  for (const std::size_t taken : {std::size_t{1501}, std::size_t{1777}, std::size_t{2049}, std::size_t{2310}}) {
    CHECK(interrupted_epoch(make, 2, taken, with_read_ahead) == expected);
  }
  CHECK(with_read_ahead > 0);
}

TEST_CASE("DataLoader2: an exception inside a run comes after the elements before it", "[loader][read_ahead]") {
  const auto make = [] {
    return iter::from(range(500)).map([](int x) {
      if (x == 300) throw std::runtime_error("bad element 300");
      return x;
    });
  };
  DataLoader2<int> loader(make());
  std::vector<int> got;
  std::vector<std::byte> blob;
  try {
    for (int x : loader) {
      got.push_back(x);
      if (x == 290) blob = loader.state_dict();  // the failure may already wait in the run
    }
    FAIL("no exception");
  } catch (const std::runtime_error& error) {
    CHECK(std::string(error.what()) == "bad element 300");
  }
  CHECK(got == range(300));
  // Restored, the loader continues after element 290 and meets the same failure.
  DataLoader2<int> resumed(make());
  resumed.load_state_dict(blob);
  std::vector<int> rest;
  CHECK_THROWS_WITH(
      [&] {
        for (int x : resumed) rest.push_back(x);
      }(),
      "bad element 300");
  CHECK(rest == range(291, 300));
}

TEST_CASE("DataLoader2: limit and pause and elements_in_epoch are exact in the middle of a run",
          "[loader][read_ahead]") {
  DataLoader2<int> loader(iter::from(range(1000)));
  auto it = loader.begin();
  std::vector<int> got;
  for (int i = 0; i < 200; ++i, ++it) got.push_back(*it);  // the runs have grown
  loader.limit(7);
  const auto limited = drain<int>(it, loader);
  CHECK(limited == range(200, 207));
  CHECK(loader.elements_in_epoch() == 207);
  loader.limit(std::nullopt);
  loader.resume();
  for (int i = 0; i < 10; ++i, ++it) got.push_back(*it);
  loader.pause();  // inside the loop, with elements left in the run
  CHECK(it == loader.end());
  CHECK(loader.elements_in_epoch() == 217);
  loader.resume();
  const auto rest = drain<int>(it, loader);
  CHECK(rest == range(217, 1000));
  CHECK(loader.elements_in_epoch() == 1000);

  // limit(0) pauses after the next element, as it did one element at a time.
  DataLoader2<int> zero(iter::from(range(1000)));
  auto from_start = zero.begin();
  for (int i = 0; i < 300; ++i) ++from_start;
  zero.limit(0);
  CHECK(drain<int>(from_start, zero) == std::vector<int>{300});
  zero.resume();
  CHECK(drain<int>(from_start, zero) == std::vector<int>{301});
}

TEST_CASE("DataLoader2: a stale iterator fails in the middle of a run too", "[loader][read_ahead]") {
  DataLoader2<int> loader(iter::from(range(1000)));
  auto old = loader.begin();
  for (int i = 0; i < 100; ++i) ++old;
  (void)*old;
  auto fresh = loader.begin();  // a new epoch
  CHECK(*fresh == 0);
  CHECK_THROWS_MATCHES(
      *++old, dpipe::UsageError,
      Catch::Message("This iterator has been invalidated because another iterator has been created from the same "
                     "DataLoader2.\nThis may be caused multiple references to the same DataLoader2. For feedback "
                     "regarding this single iterator per DataLoader2 constraint, feel free to comment on this issue: "
                     "https://github.com/pytorch/data/issues/45."));
}

TEST_CASE("DataLoader2: elements without a Serializer or large ones are never read ahead", "[loader][read_ahead]") {
  SECTION("elements without a Serializer") {
    auto made = std::make_shared<int>(0);
    DataLoader2<Opaque> loader(iter::from(range(500)).map([made](int x) {
      ++*made;
      return Opaque{std::make_unique<int>(x)};
    }));
    int taken = 0;
    for (auto& element : loader) {
      CHECK(*element.value == taken);
      ++taken;
      CHECK(*made == taken);  // made one by one, as handed out
    }
    CHECK(taken == 500);
  }
  SECTION("elements of 40000 bytes") {
    auto made = std::make_shared<int>(0);
    DataLoader2<std::string> loader(iter::from(range(200)).map([made](int x) {
      ++*made;
      return std::string(40000, static_cast<char>('a' + x % 26));
    }));
    int taken = 0;
    for (const auto& element : loader) {
      CHECK(element.size() == 40000);
      ++taken;
      CHECK(*made == taken);
    }
    CHECK(taken == 200);
  }
}

TEST_CASE("DataLoader2: small quick elements are read ahead at most one run", "[loader][read_ahead]") {
  auto made = std::make_shared<int>(0);
  DataLoader2<int> loader(iter::from(range(5000)).map([made](int x) {
    ++*made;
    return x;
  }));
  int taken = 0;
  int most_ahead = 0;
  for (int x : loader) {
    CHECK(x == taken);
    ++taken;
    most_ahead = std::max(most_ahead, *made - taken);
    REQUIRE(*made - taken < static_cast<int>(ReadAhead::kMaxRun));
  }
  CHECK(most_ahead > 0);
  CHECK(taken == 5000);
}

}  // namespace

#pragma once
// The standard battery every node runs (SPEC §4): the output on a known input, the length, the
// bulk (pull) path against the element path, and save at breakpoints {0, 1, 4, end} followed by a
// restore into a fresh graph that must yield exactly the rest.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

namespace dpipe::testing {

/// The integers begin .. end-1.
inline std::vector<int> range(int begin, int end) {
  std::vector<int> values;
  for (int i = begin; i < end; ++i) values.push_back(i);
  return values;
}

/// The integers 0 .. n-1.
inline std::vector<int> range(int n) { return range(0, n); }

/// `pipe`, whose root is a random node (shuffle, in_batch_shuffle), seeded with `seed` for its
/// next iteration.
template <class T>
IterPipe<T> seeded(IterPipe<T> pipe, std::uint64_t seed) {
  dynamic_cast<RandomDataPipe&>(pipe.node()).set_seed(seed);
  return pipe;
}

/// Every element of one iteration of `pipe`, read with next().
template <class T>
std::vector<T> collect(const IterPipe<T>& pipe) {
  std::vector<T> out;
  for (auto& element : pipe) out.push_back(std::move(element));
  return out;
}

/// Every element of one iteration of `pipe`, read with pull() in chunks of `chunk`.
template <class T>
std::vector<T> collect_pulled(const IterPipe<T>& pipe, std::size_t chunk) {
  std::vector<T> out;
  pipe.node().reset();
  while (pipe.node().pull(out, chunk) == chunk) {
  }
  return out;
}

/// Reads `count` elements with next() after a reset; returns them.
template <class T>
std::vector<T> take(const IterPipe<T>& pipe, std::size_t count) {
  std::vector<T> out;
  pipe.node().reset();
  for (std::size_t i = 0; i < count; ++i) {
    auto element = pipe.node().next();
    REQUIRE(element.has_value());
    out.push_back(std::move(*element));
  }
  return out;
}

/// The rest of the current iteration of `pipe`, read with next().
template <class T>
std::vector<T> rest(const IterPipe<T>& pipe) {
  std::vector<T> out;
  while (auto element = pipe.node().next()) out.push_back(std::move(*element));
  return out;
}

/// The value of field `name` of the node at `path` ("batch/filter") in a graph checkpoint of
/// `pipe`.
template <class T, class Pipe>
T saved_field(const Pipe& pipe, const std::string& path, const std::string& name) {
  const auto store = StateStore::from_blob(graph::save_state(pipe));
  return StateReader(store, "graph/" + path).read<T>(name);
}

/// Runs the battery on the pipes `make()` builds (each call must build a fresh, identically
/// configured graph, seeded identically when it is random).
template <class Make, class T = typename std::invoke_result_t<Make&>::value_type>
void check_battery(Make make, const std::vector<T>& expected, std::optional<std::size_t> expected_length) {
  INFO("known output");
  CHECK(collect(make()) == expected);

  INFO("length");
  CHECK(make().length() == expected_length);

  for (const std::size_t chunk : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{64}}) {
    INFO("pulled in chunks of " << chunk);
    CHECK(collect_pulled(make(), chunk) == expected);
  }

  std::set<std::size_t> breakpoints{0, 1, 4, expected.size()};
  for (const std::size_t k : breakpoints) {
    if (k > expected.size()) continue;
    INFO("save after " << k << " elements, restore into a fresh graph");
    const auto original = make();
    auto seen = take(original, k);
    const auto blob = graph::save_state(original);
    const auto restored = make();
    graph::load_state(restored, blob);
    auto continued = collect(restored);  // begin() continues the restored iteration
    std::vector<T> joined = seen;
    joined.insert(joined.end(), continued.begin(), continued.end());
    CHECK(joined == expected);
    INFO("saving does not disturb the original");
    auto original_rest = rest(original);
    CHECK(original_rest == continued);
  }
}

}  // namespace dpipe::testing

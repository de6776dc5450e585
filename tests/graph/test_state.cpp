// Whole-graph checkpoints: a blob from another graph, truncated or corrupted blobs are refused
// with StateError, and thousands of random corruptions never crash (ASan/UBSan in CI).

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/battery.hpp"
#include "support/corruption.hpp"

namespace {

namespace iter = dpipe::iter;
namespace graph = dpipe::graph;

using dpipe::testing::range;

dpipe::IterPipe<std::vector<int>> make_pipeline() {
  auto shuffled = iter::from(range(200)).shuffle(16);
  dynamic_cast<dpipe::RandomDataPipe&>(shuffled.node()).set_seed(5);
  auto forks = shuffled.enumerate().fork(2);
  return forks[0]
      .map([](auto pair) { return static_cast<int>(pair.first); })
      .zip(forks[1].map([](auto pair) { return pair.second; }))
      .map([](auto pair) { return dpipe::testing::mix(std::get<0>(pair), 1000, std::get<1>(pair)); })
      .batch(5);
}

std::vector<std::byte> saved_after(int elements) {
  auto pipe = make_pipeline();
  (void)dpipe::testing::take(pipe, static_cast<std::size_t>(elements));
  return graph::save_state(pipe);
}

TEST_CASE("graph state: a mixed pipeline restores exactly at every position", "[graph][state]") {
  const auto expected = dpipe::testing::collect(make_pipeline());
  for (int k = 0; k <= 40; ++k) {
    auto restored = make_pipeline();
    graph::load_state(restored, saved_after(k));
    auto rest = dpipe::testing::collect(restored);
    REQUIRE(rest.size() == expected.size() - static_cast<std::size_t>(k));
    CHECK(std::equal(rest.begin(), rest.end(), expected.begin() + k));
  }
}

TEST_CASE("graph state: nodes are keyed by their path / stateless nodes do not count in it", "[graph][state]") {
  std::vector<std::string> paths;
  std::vector<std::string> stateful;
  for (const auto& entry : graph::node_paths(make_pipeline().ptr())) {
    paths.push_back(entry.path);
    if (!entry.node->stateless()) stateful.push_back(entry.stateful_path);
  }
  CHECK(paths == std::vector<std::string>{"batch", "batch/map", "batch/map/zip", "batch/map/zip[0]/map",
                                          "batch/map/zip[1]/map", "batch/map/zip[0]/map/fork_child",
                                          "batch/map/zip[1]/map/fork_child", "batch/map/zip[0]/map/fork_child/fork",
                                          "batch/map/zip[0]/map/fork_child/fork/enumerate",
                                          "batch/map/zip[0]/map/fork_child/fork/enumerate/shuffle",
                                          "batch/map/zip[0]/map/fork_child/fork/enumerate/shuffle/from"});
  CHECK(stateful == std::vector<std::string>{"zip", "zip[0]/fork", "zip[0]/fork/enumerate",
                                             "zip[0]/fork/enumerate/shuffle", "zip[0]/fork/enumerate/shuffle/from"});
}

/// 30 ints shuffled with a fixed seed, with `extra` applied between the shuffle and the batch.
template <class Extra>
auto shuffled_batches(Extra extra) {
  auto shuffled = iter::from(range(30)).shuffle(8);
  dynamic_cast<dpipe::RandomDataPipe&>(shuffled.node()).set_seed(11);
  return extra(shuffled).batch(4);
}

TEST_CASE("graph state: a checkpoint restores into a graph that gained or lost a stateless node", "[graph][state]") {
  const auto plain = [](const auto& pipe) { return pipe; };
  const auto mapped = [](const auto& pipe) { return pipe.map([](int x) { return x; }).map([](int x) { return x; }); };
  const auto expected = dpipe::testing::collect(shuffled_batches(plain));
  auto saved_plain = shuffled_batches(plain);
  (void)dpipe::testing::take(saved_plain, 2);
  auto saved_mapped = shuffled_batches(mapped);
  (void)dpipe::testing::take(saved_mapped, 3);
  const std::vector<std::pair<std::vector<std::byte>, std::size_t>> blobs{{graph::save_state(saved_plain), 2},
                                                                          {graph::save_state(saved_mapped), 3}};
  for (const auto& [blob, taken] : blobs) {
    auto gained = shuffled_batches(mapped);
    graph::load_state(gained, blob);
    auto rest = dpipe::testing::collect(gained);
    CHECK(std::equal(rest.begin(), rest.end(), expected.begin() + static_cast<std::ptrdiff_t>(taken), expected.end()));
    auto lost = shuffled_batches(plain);
    graph::load_state(lost, blob);
    CHECK(dpipe::testing::collect(lost) == rest);
  }
}

TEST_CASE("graph state: a stateful node added / removed / of another element type is refused naming its path",
          "[graph][state]") {
  auto saved = shuffled_batches([](const auto& pipe) { return pipe; });
  (void)dpipe::testing::take(saved, 2);
  const auto blob = graph::save_state(saved);

  auto added = shuffled_batches([](const auto& pipe) { return pipe.filter([](int x) { return x >= 0; }); });
  const auto filter = graph::find_dps(graph::traverse_dps(added), "filter").front();
  CHECK_THROWS_MATCHES(
      graph::load_state(added, blob), dpipe::StateError,
      Catch::Message("graph/batch/filter: the checkpoint holds no state for this node (" + filter->label() +
                     "): a stateful node was added, removed or moved since the checkpoint was "
                     "saved; restore it into a pipeline built by the same code"));

  auto removed = iter::from(range(30)).batch(4);
  CHECK_THROWS_MATCHES(graph::load_state(removed, blob), dpipe::StateError,
                       Catch::Message("graph/batch/from: the checkpoint holds no state for this node (" +
                                      graph::find_dps(graph::traverse_dps(removed), "from").front()->label() +
                                      "): a stateful node was added, removed or moved since the checkpoint was "
                                      "saved; restore it into a pipeline built by the same code"));

  std::vector<long> longs(30);
  auto retyped = iter::from(longs).shuffle(8).batch(4);
  CHECK_THROWS_MATCHES(
      graph::load_state(retyped, blob), dpipe::StateError,
      Catch::Message("graph/batch/shuffle: the checkpoint was saved from a node of element type int, "
                     "this node (" +
                     graph::find_dps(graph::traverse_dps(retyped), "shuffle").front()->label() + ") yields long int"));
}

TEST_CASE("graph state: a checkpoint with state for a node the graph lacks is refused", "[graph][state]") {
  auto zipped = iter::from(range(5)).zip(iter::from(range(5)));
  (void)dpipe::testing::take(zipped, 2);
  const auto blob = graph::save_state(zipped);
  auto single = iter::from(range(5)).zip(iter::from(range(5)));
  graph::load_state(single, blob);  // the same graph restores
  auto lone = iter::from(range(5)).map([](int x) { return std::tuple<int, int>(x, x); });
  CHECK_THROWS_AS(graph::load_state(lone, blob), dpipe::StateError);
  auto zip_of_maps = iter::from(range(5)).map([](int x) { return x; }).zip(iter::from(range(5)));
  graph::load_state(zip_of_maps, blob);  // a stateless node inside one branch does not count either
  CHECK(dpipe::testing::collect(zip_of_maps) == std::vector<std::tuple<int, int>>{{2, 2}, {3, 3}, {4, 4}});
}

TEST_CASE("graph state: truncated / corrupted / foreign and old blobs are refused", "[graph][state]") {
  const auto blob = saved_after(7);
  auto target = make_pipeline();
  CHECK_THROWS_MATCHES(graph::load_state(target, std::span(blob).first(10)), dpipe::StateError,
                       Catch::Message("the checkpoint is truncated: 10 bytes, fewer than its 28-byte envelope"));
  for (const std::size_t size : {std::size_t{28}, std::size_t{36}, blob.size() / 2, blob.size() - 1}) {
    CHECK_THROWS_MATCHES(
        graph::load_state(target, std::span(blob).first(size)), dpipe::StateError,
        Catch::Message(fmt::format("the checkpoint is truncated: it has {} of its {} bytes", size, blob.size())));
  }
  auto longer = blob;
  longer.push_back(std::byte{0});
  CHECK_THROWS_MATCHES(graph::load_state(target, longer), dpipe::StateError,
                       Catch::Message("the checkpoint is followed by 1 bytes that are not part of it"));
  auto flipped = blob;
  flipped[blob.size() / 2] ^= std::byte{0x40};
  CHECK_THROWS_MATCHES(graph::load_state(target, flipped), dpipe::StateError,
                       Catch::Message("the checkpoint is corrupted: its checksum does not match its contents"));
  auto foreign = blob;
  foreign[0] = std::byte{'X'};
  CHECK_THROWS_MATCHES(graph::load_state(target, foreign), dpipe::StateError,
                       Catch::Message("the bytes are not a dpipe checkpoint (bad magic)"));
  auto future = blob;
  future[8] = std::byte{9};
  CHECK_THROWS_MATCHES(graph::load_state(target, future), dpipe::StateError,
                       Catch::Message("the checkpoint has format version 9, this dpipe reads version 4"));
  for (const std::string_view magic : {"DPIPEGRF", "DPIPEDL2"}) {
    auto old = blob;
    std::memcpy(old.data(), magic.data(), magic.size());
    CHECK_THROWS_MATCHES(graph::load_state(target, old), dpipe::StateError,
                         Catch::Message(dpipe::testing::kFormat1Refusal));
  }
  // Real ones, written by the dpipe before node-path keys (tests/data).
  CHECK_THROWS_MATCHES(graph::load_state(target, dpipe::testing::test_data("format1_graph.bin")), dpipe::StateError,
                       Catch::Message(dpipe::testing::kFormat1Refusal));
  CHECK_THROWS_MATCHES(graph::load_state(target, dpipe::testing::test_data("format1_loader.bin")), dpipe::StateError,
                       Catch::Message(dpipe::testing::kFormat1Refusal));
  graph::load_state(target, blob);  // the graph is still usable with a good blob
  CHECK(dpipe::testing::collect(target).size() == 40 - 7);
}

TEST_CASE("graph state: thousands of random corruptions never crash", "[graph][state][fuzz]") {
  const auto blob = saved_after(11);
  std::mt19937_64 random(20261121);
  int corrupted_blobs = 0;
  int refused = 0;
  for (int round = 0; round < 3000; ++round) {
    const auto corrupted = dpipe::testing::corrupt(blob, random);
    if (corrupted == blob) continue;  // an edit that rewrote a byte with its own value
    ++corrupted_blobs;
    auto target = make_pipeline();
    try {
      graph::load_state(target, corrupted);
    } catch (const dpipe::StateError&) {
      ++refused;
    }
  }
  CHECK(corrupted_blobs > 2900);
  CHECK(refused == corrupted_blobs);
}

TEST_CASE("graph state: corruptions behind a valid checksum reach the node decoders / and never crash",
          "[graph][state][fuzz]") {
  // Past the checksum every node's load_state sees hostile bytes: each blob is either refused with
  // StateError or restores a graph that iterates to its end.
  const auto blob = saved_after(11);
  std::mt19937_64 random(1121);
  int refused = 0;
  int restored = 0;
  for (int round = 0; round < 3000; ++round) {
    const auto corrupted = dpipe::testing::corrupt_resealed(blob, random);
    auto target = make_pipeline();
    try {
      graph::load_state(target, corrupted);
    } catch (const dpipe::StateError&) {
      ++refused;
      continue;
    }
    ++restored;
    (void)dpipe::testing::collect(target);
  }
  CHECK(refused > 2000);
  CHECK(refused + restored == 3000);
}

}  // namespace

namespace {

TEST_CASE("graph state: saved inside a range-for body it covers exactly the elements received", "[graph][state]") {
  const auto expected = dpipe::testing::collect(make_pipeline());
  for (const std::size_t k : {std::size_t{1}, std::size_t{5}, expected.size()}) {
    auto pipe = make_pipeline();
    std::vector<std::vector<int>> seen;
    std::vector<std::byte> blob;
    for (auto& batch : pipe) {
      seen.push_back(batch);
      if (seen.size() == k) {
        blob = graph::save_state(pipe);
        break;
      }
    }
    auto restored = make_pipeline();
    graph::load_state(restored, blob);
    for (auto& batch : restored) seen.push_back(batch);
    CHECK(seen == expected);
  }
}

}  // namespace

// Whole-graph checkpoints: a blob from another graph, truncated or corrupted blobs are refused
// with StateError, and thousands of random corruptions never crash (ASan/UBSan in CI).

#include <numeric>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

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
      .map([](auto pair) { return std::get<0>(pair) * 1000 + std::get<1>(pair); })
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

TEST_CASE("graph state: a blob from another graph is refused", "[graph][state]") {
  const auto blob = saved_after(3);
  auto other = iter::from(range(10)).batch(5);
  CHECK_THROWS_AS(graph::load_state(other, blob), dpipe::StateError);
  CHECK_THROWS_WITH(graph::load_state(other, blob),
                    Catch::Matches("the graph checkpoint was saved from a different pipeline \\(graph fingerprint "
                                   "[0-9a-f]{16}, this pipeline's is [0-9a-f]{16}\\); restore it into a pipeline built "
                                   "by the same code"));
  CHECK(graph::fingerprint(make_pipeline().ptr()) == graph::fingerprint(make_pipeline().ptr()));
  CHECK(graph::fingerprint(make_pipeline().ptr()) != graph::fingerprint(other.ptr()));
}

TEST_CASE("graph state: truncated / corrupted and foreign blobs are refused", "[graph][state]") {
  const auto blob = saved_after(7);
  auto target = make_pipeline();
  CHECK_THROWS_MATCHES(graph::load_state(target, std::span(blob).first(10)), dpipe::StateError,
                       Catch::Message("the graph checkpoint is truncated: 10 bytes, fewer than its 20-byte envelope"));
  for (const std::size_t size : {std::size_t{20}, std::size_t{36}, blob.size() / 2, blob.size() - 1}) {
    CHECK_THROWS_AS(graph::load_state(target, std::span(blob).first(size)), dpipe::StateError);
  }
  auto flipped = blob;
  flipped[blob.size() / 2] ^= std::byte{0x40};
  CHECK_THROWS_MATCHES(graph::load_state(target, flipped), dpipe::StateError,
                       Catch::Message("the graph checkpoint is corrupted: its checksum does not match its contents"));
  auto foreign = blob;
  foreign[0] = std::byte{'X'};
  CHECK_THROWS_MATCHES(graph::load_state(target, foreign), dpipe::StateError,
                       Catch::Message("the bytes are not a graph checkpoint (bad magic)"));
  auto future = blob;
  future[8] = std::byte{9};
  CHECK_THROWS_MATCHES(graph::load_state(target, future), dpipe::StateError,
                       Catch::Message("the graph checkpoint has format version 9, this dpipe reads version 1"));
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

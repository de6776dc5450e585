// B1 (SPEC §11): per-element overhead in process. 10M int64 from a range -> map(x+1) ->
// filter(even) -> batch(64), against the same loop written by hand. Target: at most 2x. The two
// loops run in turn, the best of 7 runs each, so that a slow spell of the machine hits both.

#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

#include <range/v3/view/iota.hpp>

#include <dpipe/dpipe.hpp>

#include "harness.hpp"

namespace {

constexpr std::int64_t kCount = 10'000'000;
constexpr std::size_t kBatch = 64;
constexpr int kRepeats = 7;

/// Consumes a batch the same way in both loops.
struct Consumer {
  std::uint64_t sum = 0;
  std::uint64_t batches = 0;
  void operator()(const std::vector<std::int64_t>& batch) {
    sum += static_cast<std::uint64_t>(batch.size() + static_cast<std::size_t>(batch.back()));
    ++batches;
    dpipe::bench::keep(batch.data());
  }
};

/// The loop body written by hand: map, filter and batch one value.
struct HandWritten {
  Consumer consume;
  std::vector<std::int64_t> batch;
  HandWritten() { batch.reserve(kBatch); }
  void operator()(std::int64_t i) {
    const std::int64_t x = i + 1;
    if (x % 2 != 0) return;
    batch.push_back(x);
    if (batch.size() == kBatch) {
      consume(batch);
      batch = std::vector<std::int64_t>();  // the pipeline hands out a fresh vector per batch
      batch.reserve(kBatch);
    }
  }
  std::uint64_t finish() {
    if (!batch.empty()) consume(batch);
    dpipe::bench::keep(consume.batches);
    return consume.sum;
  }
};

/// The hand-written loop: a plain counting loop for the integer range, a range-for for data.
template <class Source>
std::uint64_t hand_written(const Source& source) {
  HandWritten body;
  if constexpr (std::is_same_v<Source, std::vector<std::int64_t>>) {
    for (const std::int64_t i : source) body(i);
  } else {
    for (std::int64_t i = 0; i < kCount; ++i) body(i);
  }
  return body.finish();
}

/// Measures the pipeline over `source` against the hand-written loop; returns false on a
/// checksum mismatch.
template <class Source>
bool compare(const char* label, const Source& source) {
  const auto pipeline = dpipe::iter::from(source)
                            .map([](std::int64_t x) { return x + 1; })
                            .filter([](std::int64_t x) { return x % 2 == 0; })
                            .batch(kBatch);
  std::uint64_t expected = 0;
  std::uint64_t got = 0;
  std::uint64_t elements = 0;
  const auto [hand, piped] = dpipe::bench::best_seconds_in_turn(
      kRepeats,
      [&] {
        expected = hand_written(source);
        return static_cast<std::uint64_t>(kCount);
      },
      [&] {
        Consumer consume;
        for (auto& batch : pipeline) consume(batch);
        dpipe::bench::keep(consume.batches);
        got = consume.sum;
        return static_cast<std::uint64_t>(kCount);
      },
      elements);

  std::printf("B1 overhead, source %s: 10M int64 -> map(x+1) -> filter(even) -> batch(64), in process\n", label);
  const double hand_rate = dpipe::bench::report("hand-written loop", hand, elements);
  const double pipe_rate = dpipe::bench::report("dpipe pipeline", piped, elements);
  std::printf("B1 result (%s): dpipe %.1f M/s, hand-written %.1f M/s, time ratio %.2fx (target <= 2x)%s\n", label,
              pipe_rate / 1e6, hand_rate / 1e6, hand_rate / pipe_rate, got == expected ? "" : "  CHECKSUM MISMATCH");
  return got == expected;
}

}  // namespace

int main() {
  std::vector<std::int64_t> values(static_cast<std::size_t>(kCount));
  for (std::int64_t i = 0; i < kCount; ++i) values[static_cast<std::size_t>(i)] = i;
  const bool ok =
      compare("range-v3 iota view", ranges::views::iota(std::int64_t{0}, kCount)) && compare("std::vector", values);
  return ok ? 0 : 1;
}

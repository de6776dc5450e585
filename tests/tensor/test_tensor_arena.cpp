// Worker processes' tensor arenas (MultiProcessingOptions::tensor_arena_bytes): tensors of 64 KiB
// and more reach the trainer without a copy, in the worker's shared memory; the blocks come back
// when the trainer drops them, also from epochs broken off; a full arena falls back to copies; a
// checkpoint holds bytes, not references; the trainer's tensors outlive the loader and the worker.

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"
#include "support/loader.hpp"

namespace arena_test {

using dpipe::DataLoader2;
using dpipe::DType;
using dpipe::MultiProcessingOptions;
using dpipe::MultiProcessingReadingService;
using dpipe::Tensor;
using dpipe::TensorBatch;

/// 64 KiB of pixels: each frame, and each batch of two, is made in the arena.
struct Frame {
  Tensor pixels;  // uint8 [4, 128, 128]
  std::int64_t id = 0;
  DPIPE_FIELDS(pixels, id)
};

constexpr int kFrames = 24;
constexpr std::size_t kBatches = kFrames / 2;
constexpr std::size_t kBatchBytes = std::size_t{2} << 16;

Frame make_frame(int id) {
  Frame frame{Tensor(DType::kUInt8, {4, 128, 128}), id};
  auto pixels = frame.pixels.values<std::uint8_t>();
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<std::uint8_t>(static_cast<std::size_t>(id) * 31 + i);
  return frame;
}

dpipe::IterPipe<TensorBatch<Frame>> pipeline() {
  return dpipe::iter::from(dpipe::testing::range(kFrames))
      .shuffle()
      .sharding_filter()
      .map(make_frame)
      .batch(2)
      .collate(dpipe::tensor_collate<Frame>());
}

/// A batch as plain values, to compare once no arena is left.
struct Plain {
  std::vector<std::uint8_t> pixels;
  std::vector<std::int64_t> ids;
  bool operator==(const Plain&) const = default;
};

Plain plain(const TensorBatch<Frame>& batch) {
  const auto pixels = batch[&Frame::pixels].values<std::uint8_t>();
  const auto ids = batch[&Frame::id].values<std::int64_t>();
  return {{pixels.begin(), pixels.end()}, {ids.begin(), ids.end()}};
}

bool in_arena(const Tensor& tensor) {
  return tensor.storage()->allocator()->name().starts_with("tensor arena of worker process ");
}

/// Two epochs (seed 5) of 2 worker processes without arenas: the copy path, which the other
/// services' tests check.
std::vector<Plain> reference_epochs() {
  DataLoader2<TensorBatch<Frame>> loader(pipeline(),
                                         MultiProcessingReadingService({.num_workers = 2, .tensor_arena_bytes = 0}));
  loader.seed(5);
  std::vector<Plain> plains;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (const auto& batch : loader) {
      CHECK(batch[&Frame::pixels].storage()->allocator()->name() == "heap");
      plains.push_back(plain(batch));
    }
  }
  REQUIRE(plains.size() == 2 * kBatches);
  return plains;
}

/// Options with an arena of `arena_bytes` per worker and at most 256 KiB (two batches) in flight.
MultiProcessingOptions small_arena(std::size_t arena_bytes) {
  return {.num_workers = 2, .queue_bytes = std::size_t{256} << 10, .tensor_arena_bytes = arena_bytes};
}

}  // namespace arena_test

using namespace arena_test;

TEST_CASE("Tensor arena: worker processes hand their batches to the trainer without a copy", "[mp]") {
  const auto expected = reference_epochs();
  DataLoader2<TensorBatch<Frame>> loader(pipeline(), MultiProcessingReadingService({.num_workers = 2}));
  loader.seed(5);
  std::vector<Plain> got;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (const auto& batch : loader) {
      const Tensor& pixels = batch[&Frame::pixels];
      CHECK(in_arena(pixels));
      CHECK(pixels.nbytes() == kBatchBytes);
      CHECK(reinterpret_cast<std::uintptr_t>(pixels.data()) % dpipe::kTensorAlignment == 0);
      // 16 bytes of ids: a copy costs less than a block.
      CHECK(batch[&Frame::id].storage()->allocator()->name() == "heap");
      got.push_back(plain(batch));
    }
  }
  CHECK(got == expected);
}

TEST_CASE("Tensor arena: the blocks of batches the trainer drops serve the next ones", "[mp]") {
  const auto expected = reference_epochs();
  // Room for 7 batches per worker: 12 batches each over two epochs fit only if blocks are reused.
  DataLoader2<TensorBatch<Frame>> loader(pipeline(), MultiProcessingReadingService(small_arena(7 * kBatchBytes)));
  loader.seed(5);
  std::vector<Plain> got;
  std::vector<const void*> addresses;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (const auto& batch : loader) {
      CHECK(in_arena(batch[&Frame::pixels]));
      addresses.push_back(batch[&Frame::pixels].data());
      got.push_back(plain(batch));
    }
  }
  CHECK(got == expected);
  std::sort(addresses.begin(), addresses.end());
  CHECK(std::unique(addresses.begin(), addresses.end()) - addresses.begin() < static_cast<std::ptrdiff_t>(kBatches));
}

TEST_CASE("Tensor arena: a trainer that keeps every batch fills the arena and the rest cross by copy", "[mp]") {
  const auto expected = reference_epochs();
  DataLoader2<TensorBatch<Frame>> loader(pipeline(), MultiProcessingReadingService(small_arena(4 * kBatchBytes)));
  loader.seed(5);
  std::vector<TensorBatch<Frame>> kept;
  for (const auto& batch : loader) kept.push_back(batch);
  std::size_t from_arena = 0;
  std::vector<Plain> got;
  for (const auto& batch : kept) {
    from_arena += in_arena(batch[&Frame::pixels]) ? 1U : 0U;
    got.push_back(plain(batch));
  }
  CHECK(got == std::vector<Plain>(expected.begin(), expected.begin() + kBatches));
  CHECK(from_arena > 0);
  CHECK(from_arena < kBatches);
}

TEST_CASE("Tensor arena: epochs broken off mid-way give the blocks of their batches in flight back", "[mp]") {
  const auto expected = reference_epochs();
  DataLoader2<TensorBatch<Frame>> loader(pipeline(), MultiProcessingReadingService(small_arena(7 * kBatchBytes)));
  loader.seed(5);
  // Each broken epoch leaves up to two batches per worker in flight, which the next epoch drops:
  // were their blocks lost, the arena would be full by the last epoch.
  for (int broken = 0; broken < 6; ++broken) {
    for (const auto& batch : loader) {
      CHECK(in_arena(batch[&Frame::pixels]));
      break;
    }
  }
  loader.seed(5);
  std::vector<Plain> got;
  for (const auto& batch : loader) {
    CHECK(in_arena(batch[&Frame::pixels]));
    got.push_back(plain(batch));
  }
  CHECK(got == std::vector<Plain>(expected.begin(), expected.begin() + kBatches));
}

TEST_CASE("Tensor arena: a checkpoint holds the tensors' bytes and restores once the arenas are gone", "[mp]") {
  const auto expected = reference_epochs();
  std::vector<Plain> got;
  std::vector<std::byte> state;
  {
    DataLoader2<TensorBatch<Frame>> loader(pipeline(), MultiProcessingReadingService({.num_workers = 2}));
    loader.seed(5);
    for (const auto& batch : loader) {
      got.push_back(plain(batch));
      if (got.size() == 3) {
        // The workers' batches in flight are drained into the checkpoint.
        state = loader.state_dict();
        break;
      }
    }
  }
  // The loader, its workers and their arenas are gone: a reference in the state would not decode.
  DataLoader2<TensorBatch<Frame>> restored(pipeline(), MultiProcessingReadingService({.num_workers = 2}));
  restored.load_state_dict(state);
  for (const auto& batch : restored) got.push_back(plain(batch));
  CHECK(got == std::vector<Plain>(expected.begin(), expected.begin() + kBatches));
}

TEST_CASE("Tensor arena: the trainer's tensors outlive a killed worker and the loader", "[mp]") {
  const auto expected = reference_epochs();
  std::vector<TensorBatch<Frame>> kept;
  {
    DataLoader2<TensorBatch<Frame>> loader(pipeline(), MultiProcessingReadingService({.num_workers = 2}));
    loader.seed(5);
    for (const auto& batch : loader) {
      kept.push_back(batch);
      if (kept.size() == 2) break;
    }
    const auto pids = dynamic_cast<MultiProcessingReadingService&>(*loader.reading_service()).worker_pids();
    for (const pid_t pid : pids) REQUIRE(kill(pid, SIGKILL) == 0);
    loader.shutdown();
  }
  REQUIRE(kept.size() == 2);
  for (std::size_t i = 0; i < kept.size(); ++i) {
    CHECK(in_arena(kept[i][&Frame::pixels]));
    CHECK(plain(kept[i]) == expected[i]);
  }
}

TEST_CASE("Tensor arena: a to_bytes in the worker's own pipeline writes the tensor's bytes", "[mp]") {
  // Only the worker's encoding of its output writes references: a user's encoding of a tensor made
  // in the arena (a cache on disk, a hash) holds its bytes.
  const auto encoded_sizes = dpipe::iter::from(dpipe::testing::range(8)).sharding_filter().map([](int id) {
    const Frame frame = make_frame(id);
    return static_cast<std::int64_t>(dpipe::to_bytes(frame.pixels).size());
  });
  DataLoader2<std::int64_t> loader(encoded_sizes, MultiProcessingReadingService({.num_workers = 2}));
  // kBytes, dtype, rank, three int64 dimensions and 64 KiB of pixels.
  const std::int64_t plain = 3 + 3 * 8 + 4 * 128 * 128;
  CHECK(dpipe::testing::epoch(loader) == std::vector<std::int64_t>(8, plain));
}

TEST_CASE("Tensor arena: tensor_arena_bytes with pin_memory or host_allocator is an error", "[mp]") {
  DataLoader2<TensorBatch<Frame>> loader(
      pipeline(),
      MultiProcessingReadingService(
          {.num_workers = 2, .host_allocator = dpipe::heap_allocator(), .tensor_arena_bytes = std::size_t{1} << 20}));
  CHECK_THROWS_MATCHES(dpipe::testing::epoch(loader), dpipe::InvalidArgument,
                       Catch::Message("MultiProcessingReadingService: tensor_arena_bytes was set with host_allocator, "
                                      "whose memory the trainer's tensors must be in; leave it unset"));
}

TEST_CASE("Tensor arena: none without worker processes or with an allocator of the trainer's", "[mp]") {
  const auto expected = reference_epochs();
  for (const auto& options : {MultiProcessingOptions{.num_workers = 2, .worker_kind = dpipe::WorkerKind::kThread},
                              MultiProcessingOptions{.num_workers = 2, .host_allocator = dpipe::heap_allocator()},
                              MultiProcessingOptions{.num_workers = 2, .tensor_arena_bytes = 0}}) {
    DataLoader2<TensorBatch<Frame>> loader(pipeline(), MultiProcessingReadingService(options));
    loader.seed(5);
    std::vector<Plain> got;
    for (const auto& batch : loader) {
      CHECK_FALSE(in_arena(batch[&Frame::pixels]));
      got.push_back(plain(batch));
    }
    CHECK(got == std::vector<Plain>(expected.begin(), expected.begin() + kBatches));
  }
}

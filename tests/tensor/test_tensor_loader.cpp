// Tensor batches through DataLoader2: worker processes decode them into the loader's allocator,
// worker threads collate straight into it, checkpoints keep them, and a collate error reaches the
// trainer. pin_memory runs against a stand-in CUDA runtime (fake_cudart.c) where no GPU is at hand.

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"
#include "support/counting_allocator.hpp"
#include "support/loader.hpp"
#include "support/message.hpp"

namespace tensor_test {

using dpipe::DataLoader2;
using dpipe::DType;
using dpipe::MultiProcessingReadingService;
using dpipe::Tensor;
using dpipe::TensorBatch;
using dpipe::WorkerKind;

struct Sample {
  Tensor image;
  std::int64_t label = 0;
  std::vector<std::int32_t> tokens;
  DPIPE_FIELDS(image, label, tokens)
};

constexpr int kSamples = 40;
constexpr std::size_t kBatch = 4;
constexpr std::size_t kBatches = kSamples / kBatch;

Sample make_sample(int id) {
  Sample sample;
  sample.image = Tensor(DType::kUInt8, {3, 8, 8});
  auto pixels = sample.image.values<std::uint8_t>();
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<std::uint8_t>(static_cast<std::size_t>(id) + i);
  sample.label = id % 7;
  sample.tokens.assign(static_cast<std::size_t>(id % 5), id);
  return sample;
}

dpipe::IterPipe<TensorBatch<Sample>> pipeline() {
  return dpipe::iter::from(dpipe::testing::range(kSamples))
      .shuffle()
      .sharding_filter()
      .map(make_sample)
      .batch(kBatch)
      .collate(dpipe::tensor_collate<Sample>().pad(&Sample::tokens, -1));
}

/// An epoch of 2 worker processes with the default allocator: what every other service must yield
/// (each worker batches its own shard).
std::vector<TensorBatch<Sample>> reference_epoch() {
  DataLoader2<TensorBatch<Sample>> loader(pipeline(), MultiProcessingReadingService({.num_workers = 2}));
  loader.seed(5);
  return dpipe::testing::epoch(loader);
}

}  // namespace tensor_test

using namespace tensor_test;

namespace {

/// An epoch of 2 workers of `kind` with `allocator`, checking that every tensor of every batch
/// comes from it.
std::vector<TensorBatch<Sample>> epoch_from(WorkerKind kind, const dpipe::HostAllocatorPtr& allocator) {
  DataLoader2<TensorBatch<Sample>> loader(
      pipeline(), MultiProcessingReadingService({.num_workers = 2, .worker_kind = kind, .host_allocator = allocator}));
  loader.seed(5);
  std::vector<TensorBatch<Sample>> got;
  for (auto& batch : loader) {
    for (const auto& tensor : batch.tensors()) CHECK(tensor.storage()->allocator() == allocator);
    got.push_back(batch);
  }
  return got;
}

}  // namespace

TEST_CASE("Tensor loader: worker processes decode each field into the loader's allocator once", "[mp]") {
  const auto expected = reference_epoch();
  REQUIRE(expected.size() == kBatches);
  auto counting = std::make_shared<dpipe::testing::CountingAllocator>();
  CHECK(epoch_from(WorkerKind::kProcess, counting) == expected);
  // Three fields and the tokens' lengths per batch, each decoded into its own buffer, nothing else.
  CHECK(counting->allocations == static_cast<std::int64_t>(kBatches * 4));
  CHECK(counting->live == 0);
}

TEST_CASE("Tensor loader: worker threads collate straight into the loader's allocator", "[mp][concurrency]") {
  const auto expected = reference_epoch();
  auto counting = std::make_shared<dpipe::testing::CountingAllocator>();
  CHECK(epoch_from(WorkerKind::kThread, counting) == expected);
  // Each sample's image, then each batch's three fields and lengths: no copy after the collate.
  CHECK(counting->allocations == static_cast<std::int64_t>(kSamples + kBatches * 4));
  CHECK(counting->live == 0);
}

TEST_CASE("Tensor loader: a tensor exported with DLPack outlives the batch and the loader", "[mp]") {
  auto counting = std::make_shared<dpipe::testing::CountingAllocator>();
  DLManagedTensor* managed = nullptr;
  std::vector<std::uint8_t> first_image;
  {
    DataLoader2<TensorBatch<Sample>> loader(
        pipeline(), MultiProcessingReadingService({.num_workers = 2, .host_allocator = counting}));
    loader.seed(5);
    for (auto& batch : loader) {
      const Tensor& image = batch[&Sample::image];
      first_image.assign(image.values<std::uint8_t>().begin(), image.values<std::uint8_t>().end());
      managed = dpipe::to_dlpack(image).release();
      break;
    }
  }
  REQUIRE(managed != nullptr);
  CHECK(counting->live == 1);  // the loader and its batches are gone; the export holds its buffer
  CHECK(managed->dl_tensor.shape[0] == static_cast<std::int64_t>(kBatch));
  CHECK(managed->dl_tensor.shape[1] == 3);
  const auto* bytes = static_cast<const std::uint8_t*>(managed->dl_tensor.data);
  CHECK(std::vector<std::uint8_t>(bytes, bytes + first_image.size()) == first_image);
  managed->deleter(managed);
  CHECK(counting->live == 0);
}

TEST_CASE("Tensor loader: a checkpoint mid-epoch restores the rest of the tensor batches", "[mp]") {
  const auto expected = reference_epoch();
  for (const auto kind : {WorkerKind::kProcess, WorkerKind::kThread}) {
    INFO((kind == WorkerKind::kThread ? "threads" : "processes"));
    const MultiProcessingReadingService service({.num_workers = 2, .worker_kind = kind});
    DataLoader2<TensorBatch<Sample>> loader(pipeline(), service);
    loader.seed(5);
    std::vector<TensorBatch<Sample>> got;
    std::vector<std::byte> state;
    for (auto& batch : loader) {
      got.push_back(batch);
      if (got.size() == 3) {
        state = loader.state_dict();
        break;
      }
    }
    loader.shutdown();
    DataLoader2<TensorBatch<Sample>> restored(pipeline(), service);
    restored.load_state_dict(state);
    for (auto& batch : restored) got.push_back(batch);
    CHECK(got == expected);
  }
}

TEST_CASE("Tensor loader: rows of different shapes in a worker are a WorkerError with the collate's message", "[mp]") {
  auto pipe = dpipe::iter::from(dpipe::testing::range(8))
                  .sharding_filter()
                  .map(make_sample)
                  .batch(2)
                  .collate(dpipe::tensor_collate<Sample>());
  DataLoader2<TensorBatch<Sample>> loader(pipe, MultiProcessingReadingService({.num_workers = 2}));
  CHECK_THROWS_MATCHES(
      dpipe::testing::epoch(loader), dpipe::WorkerError,
      dpipe::testing::MessageContains(
          {"Caught dpipe::InvalidArgument in worker process 0.\nOriginal message: "
           "tensor_collate<tensor_test::Sample>: field 'tokens' of row 1 has shape [2], row 0 has shape [0]"}));
}

TEST_CASE("Tensor loader: pin_memory and host_allocator together are an error", "[mp]") {
  DataLoader2<TensorBatch<Sample>> loader(
      pipeline(),
      MultiProcessingReadingService({.num_workers = 1,
                                     .pin_memory = true,
                                     .host_allocator = std::make_shared<dpipe::testing::CountingAllocator>()}));
  CHECK_THROWS_MATCHES(
      loader.begin(), dpipe::InvalidArgument,
      Catch::Message("MultiProcessingReadingService: pin_memory and host_allocator were both set; pass "
                     "a pinned allocator as host_allocator, or set pin_memory alone"));
}

TEST_CASE("Tensor loader: pin_memory delivers pinned batches from processes and threads", "[mp][concurrency]") {
  // The stand-in runtime, unless the environment names one (a GPU machine: libcudart.so).
  ::setenv("DPIPE_CUDA_RUNTIME", DPIPE_FAKE_CUDART, 0);
  const auto expected = reference_epoch();
  for (const auto kind : {WorkerKind::kProcess, WorkerKind::kThread}) {
    INFO((kind == WorkerKind::kThread ? "threads" : "processes"));
    DataLoader2<TensorBatch<Sample>> loader(
        pipeline(), MultiProcessingReadingService({.num_workers = 2, .worker_kind = kind, .pin_memory = true}));
    loader.seed(5);
    std::vector<TensorBatch<Sample>> got;
    for (auto& batch : loader) {
      for (const auto& tensor : batch.tensors()) CHECK(tensor.storage()->allocator()->pinned());
      got.push_back(batch);
    }
    CHECK(got == expected);
  }
}

// Batches as tensors: samples with an image, a label and a variable-length list of tokens become
// one contiguous tensor per field (the tokens padded, with their lengths), made in 2 worker
// processes and decoded straight into the trainer's allocator, then handed to a consumer through
// DLPack without a copy. Large frames go through tensor_batch: each is copied into its batch as it
// comes, in the worker's tensor arena, and the trainer's tensors are the worker's memory (no copy
// at all). With pin_memory, the same batches arrive in page-locked memory where the CUDA runtime is
// installed; without one the loader says so.

#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <dpipe/dpipe.hpp>

namespace {

// [sample]
struct Sample {
  dpipe::Tensor image;               // uint8 [3, 32, 32]
  std::int64_t label = 0;            // a scalar: the batch's tensor is int64 [batch]
  std::vector<std::int32_t> tokens;  // variable length: padded to the batch's longest
  DPIPE_FIELDS(image, label, tokens)
};
// [sample]

Sample make_sample(int id) {
  Sample sample;
  sample.image = dpipe::Tensor(dpipe::DType::kUInt8, {3, 32, 32});
  for (auto& pixel : sample.image.values<std::uint8_t>()) pixel = static_cast<std::uint8_t>(id);
  sample.label = id % 10;
  sample.tokens.assign(static_cast<std::size_t>(1 + id % 4), id);
  return sample;
}

// [frames]
struct Frame {
  dpipe::Tensor pixels;  // uint8 [3, 256, 256]: 192 KiB, made in the worker's tensor arena
  std::int64_t id = 0;
  DPIPE_FIELDS(pixels, id)
};

Frame make_frame(int id) {
  Frame frame{dpipe::Tensor(dpipe::DType::kUInt8, {3, 256, 256}), id};
  for (auto& pixel : frame.pixels.values<std::uint8_t>()) pixel = static_cast<std::uint8_t>(id);
  return frame;
}

dpipe::IterPipe<dpipe::TensorBatch<Frame>> frame_batches() {
  std::vector<int> ids(64);
  std::iota(ids.begin(), ids.end(), 0);
  // batch(32) and collate(tensor_collate) in one node: a batch never holds its 32 frames at once.
  return dpipe::iter::from(ids).sharding_filter().map(make_frame) |
         dpipe::iter::tensor_batch(32, dpipe::tensor_collate<Frame>());
}
// [frames]

// [pipeline]
dpipe::IterPipe<dpipe::TensorBatch<Sample>> batches() {
  std::vector<int> ids(64);
  std::iota(ids.begin(), ids.end(), 0);
  return dpipe::iter::from(ids)
      .shuffle()
      .sharding_filter()
      .map(make_sample)
      .batch(16)
      .collate(dpipe::tensor_collate<Sample>().pad(&Sample::tokens, 0));  // pad value 0, plus lengths
}
// [pipeline]

/// Sums a DLPack tensor's bytes, as a framework that took it would read it.
std::uint64_t consume(DLManagedTensor* managed) {
  const auto& tensor = managed->dl_tensor;
  std::int64_t count = 1;
  for (int dim = 0; dim < tensor.ndim; ++dim) count *= tensor.shape[dim];
  const auto* bytes = static_cast<const std::uint8_t*>(tensor.data);
  std::uint64_t sum = 0;
  for (std::int64_t i = 0; i < count * tensor.dtype.bits / 8; ++i) sum += bytes[i];
  managed->deleter(managed);  // the framework's tensor is gone: the buffer may go back to its allocator
  return sum;
}

}  // namespace

int main() {
  dpipe::DataLoader2<dpipe::TensorBatch<Sample>> loader(batches(),
                                                        dpipe::MultiProcessingReadingService({.num_workers = 2}));
  loader.seed(3);
  std::uint64_t pixels = 0;
  std::size_t shared = 0;
  std::size_t count = 0;
  // [loop]
  for (const auto& batch : loader) {
    const dpipe::Tensor& image = batch[&Sample::image];             // uint8 [16, 3, 32, 32]
    const dpipe::Tensor& tokens = batch[&Sample::tokens];           // int32 [16, longest]
    const dpipe::Tensor& lengths = batch.lengths(&Sample::tokens);  // int64 [16]
    DLManagedTensor* exported = dpipe::to_dlpack(image).release();  // no copy: the batch's own buffer
    if (exported->dl_tensor.data == image.data()) ++shared;
    pixels += consume(exported);
    if (count++ == 0) {
      std::printf("first batch: image %s, tokens %s, lengths %s\n", image.describe().c_str(), tokens.describe().c_str(),
                  lengths.describe().c_str());
    }
  }
  // [loop]
  std::printf("%zu batches, %zu exported without a copy, pixel sum %llu\n", count, shared,
              static_cast<unsigned long long>(pixels));

  // [arena]
  dpipe::DataLoader2<dpipe::TensorBatch<Frame>> frames(frame_batches(),
                                                       dpipe::MultiProcessingReadingService({.num_workers = 2}));
  std::size_t in_arena = 0;
  for (const auto& batch : frames) {
    // The batch's pixels lie in the shared memory of the worker that made them: no copy.
    const std::string where = batch[&Frame::pixels].storage()->allocator()->name();
    if (where.starts_with("tensor arena of worker process")) ++in_arena;
  }
  std::printf("frame batches made in the workers' tensor arenas: %zu of 2\n", in_arena);
  // [arena]

  // [pinned]
  try {
    dpipe::DataLoader2<dpipe::TensorBatch<Sample>> pinned(
        batches(), dpipe::MultiProcessingReadingService({.num_workers = 2, .pin_memory = true}));
    std::size_t pinned_batches = 0;
    for (const auto& batch : pinned) {
      if (batch[&Sample::image].storage()->allocator()->pinned()) ++pinned_batches;
    }
    std::printf("pinned batches: %zu\n", pinned_batches);
  } catch (const dpipe::NotSupportedError& error) {
    std::printf("no pinned memory here: %s\n", error.what());
  }
  // [pinned]
  return 0;
}

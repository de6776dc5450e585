// A trainer loop over DataLoader2: seed(epoch) every epoch, a checkpoint taken in the middle of
// an epoch, the loader destroyed, and a new loader restored from the checkpoint that continues
// exactly where the first one stopped.

#include <cstdio>
#include <numeric>
#include <vector>

#include <dpipe/dpipe.hpp>

namespace {

struct Sample {
  int id = 0;
  float value = 0.0F;
  DPIPE_FIELDS(id, value)
};
using Batch = std::vector<Sample>;

// [pipeline]
/// The same code builds the pipeline for the first loader and for the restored one.
dpipe::DataLoader2<Batch> make_loader() {
  std::vector<int> ids(1000);
  std::iota(ids.begin(), ids.end(), 0);
  auto pipeline = dpipe::iter::from(std::move(ids))
                      .shuffle(/*buffer_size=*/256)
                      .sharding_filter()
                      .map([](int id) {
                        return Sample{id, static_cast<float>(id) / 1000.0F};
                      })
                      .batch(32);
  return dpipe::DataLoader2<Batch>(pipeline, dpipe::InProcessReadingService(/*prefetch_cnt=*/4));
}
// [pipeline]

/// Stands in for a training step: folds the batch into a running checksum.
void train_step(const Batch& batch, std::uint64_t& checksum) {
  for (const auto& sample : batch) checksum = checksum * 31 + static_cast<std::uint64_t>(sample.id);
}

}  // namespace

int main() {
  constexpr std::uint64_t kEpochs = 3;
  constexpr std::size_t kStopAfter = 10;  // batches into epoch 1

  // An uninterrupted run, for comparison.
  std::uint64_t expected = 0;
  {
    auto loader = make_loader();
    for (std::uint64_t epoch = 0; epoch < kEpochs; ++epoch) {
      loader.seed(epoch);
      for (const auto& batch : loader) train_step(batch, expected);
    }
  }

  // [train]
  std::uint64_t checksum = 0;
  std::vector<std::byte> checkpoint;
  {
    auto loader = make_loader();
    for (std::uint64_t epoch = 0; epoch < kEpochs && checkpoint.empty(); ++epoch) {
      loader.seed(epoch);
      std::size_t step = 0;
      for (const auto& batch : loader) {
        train_step(batch, checksum);
        if (epoch == 1 && ++step == kStopAfter) {
          checkpoint = loader.state_dict();  // covers exactly the batches trained on
          break;
        }
      }
    }
  }  // the first loader is gone, as after a crash or a preemption
  std::printf("stopped in epoch 1 after %zu batches; checkpoint of %zu bytes\n", kStopAfter, checkpoint.size());

  auto resumed = make_loader();
  resumed.load_state_dict(checkpoint);
  for (const auto& batch : resumed) train_step(batch, checksum);  // the rest of epoch 1
  resumed.seed(2);
  for (const auto& batch : resumed) train_step(batch, checksum);  // epoch 2
  // [train]

  std::printf("uninterrupted checksum %llu\nresumed checksum       %llu\nidentical: %s\n",
              static_cast<unsigned long long>(expected), static_cast<unsigned long long>(checksum),
              expected == checksum ? "yes" : "NO");
  return expected == checksum ? 0 : 1;
}

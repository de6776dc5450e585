// The main example: a trainer loop over DataLoader2 with two worker processes. It trains three
// epochs without interruption, then trains again, stops in the middle of epoch 1 with a
// checkpoint written to a file, destroys the loader (as a crash or a preemption would), restores a
// new loader from the file, and finishes: the second run sees exactly the batches of the first.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

#include <dpipe/dpipe.hpp>

namespace {

// [sample]
/// What crosses from the workers to the trainer. DPIPE_FIELDS lets dpipe encode it.
struct Sample {
  int id = 0;
  std::vector<float> features;
  DPIPE_FIELDS(id, features)
};
using Batch = std::vector<Sample>;
// [sample]

// [loader]
/// The same code builds the loader of the first run and the restored one.
dpipe::DataLoader2<Batch> make_loader() {
  std::vector<int> ids(10000);
  std::iota(ids.begin(), ids.end(), 0);
  auto pipeline = dpipe::iter::from(std::move(ids))
                      .shuffle(/*buffer_size=*/1000)  // the same order in every worker...
                      .sharding_filter()              // ...of which each worker keeps its share
                      .map([](int id) {               // runs in the workers: decode, augment, ...
                        std::vector<float> features(16);
                        for (std::size_t i = 0; i < features.size(); ++i) {
                          features[i] = static_cast<float>(id) * 0.001F + static_cast<float>(i);
                        }
                        return Sample{id, std::move(features)};
                      })
                      .batch(64);
  return dpipe::DataLoader2<Batch>(pipeline, dpipe::MultiProcessingReadingService({.num_workers = 2}));
}
// [loader]

/// Stands in for a training step: folds the batch into a running checksum.
void train_step(const Batch& batch, std::uint64_t& checksum) {
  for (const auto& sample : batch) checksum = checksum * 31 + static_cast<std::uint64_t>(sample.id);
}

}  // namespace

int main() {
  constexpr std::uint64_t kEpochs = 3;
  constexpr std::size_t kStopAfter = 40;  // batches into epoch 1

  // An uninterrupted run, for comparison.
  std::uint64_t expected = 0;
  std::size_t batches = 0;
  const auto start = std::chrono::steady_clock::now();
  {
    auto loader = make_loader();
    for (std::uint64_t epoch = 0; epoch < kEpochs; ++epoch) {
      loader.seed(epoch);
      for (const auto& batch : loader) {
        train_step(batch, expected);
        ++batches;
      }
    }
    auto& workers = dynamic_cast<dpipe::MultiProcessingReadingService&>(*loader.reading_service());
    std::printf("dpipe demo: 10000 samples -> shuffle -> sharding_filter -> map -> batch(64), %zu worker processes\n",
                workers.worker_pids().size());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("uninterrupted: %llu epochs, %zu batches (%.0f samples/s)\n", static_cast<unsigned long long>(kEpochs),
              batches, static_cast<double>(batches) * 64.0 / seconds);

  // [train]
  std::uint64_t checksum = 0;
  const auto file = std::filesystem::temp_directory_path() / ("dpipe-demo-" + std::to_string(getpid()) + ".ckpt");
  {
    auto loader = make_loader();
    bool stopped = false;
    for (std::uint64_t epoch = 0; epoch < kEpochs && !stopped; ++epoch) {
      loader.seed(epoch);
      std::size_t step = 0;
      for (const auto& batch : loader) {
        train_step(batch, checksum);
        if (epoch == 1 && ++step == kStopAfter) {
          // Exactly the batches trained on, workers included; written atomically, so a crash
          // while saving leaves the previous checkpoint, never half of this one.
          dpipe::save_checkpoint_file(file, loader.state_dict());
          stopped = true;
          break;
        }
      }
    }
  }  // the loader and its workers are gone
  std::printf("stopped in epoch 1 after %zu batches; checkpoint of %ju bytes\n", kStopAfter,
              static_cast<std::uintmax_t>(std::filesystem::file_size(file)));

  auto resumed = make_loader();
  resumed.load_state_dict(dpipe::load_checkpoint_file(file));  // new workers continue where the old ones stopped
  std::printf("restored: epoch %llu of the loader, %llu batches already trained in it\n",
              static_cast<unsigned long long>(resumed.epoch()),
              static_cast<unsigned long long>(resumed.elements_in_epoch()));
  for (const auto& batch : resumed) train_step(batch, checksum);  // the rest of epoch 1
  resumed.seed(2);
  for (const auto& batch : resumed) train_step(batch, checksum);  // epoch 2
  // [train]
  std::filesystem::remove(file);

  std::printf("uninterrupted checksum %llu\nresumed checksum       %llu\nidentical: %s\n",
              static_cast<unsigned long long>(expected), static_cast<unsigned long long>(checksum),
              expected == checksum ? "yes" : "NO");
  return expected == checksum ? 0 : 1;
}

// A pipeline without a loader: seeded each epoch the way DataLoader2 seeds it, with a checkpoint
// taken in the middle of an epoch and restored into a pipeline built anew, which continues exactly
// where the first one stopped.

#include <cstdio>
#include <numeric>
#include <vector>

#include <dpipe/dpipe.hpp>

namespace {

struct Sample {
  int id = 0;
  std::vector<float> features;
  DPIPE_FIELDS(id, features)  // lets checkpoints hold Samples
};

// [pipeline]
/// The pipeline: shuffle ids, keep this instance's share, turn ids into samples, batch, read ahead.
dpipe::IterPipe<std::vector<Sample>> build_pipeline(int num_samples) {
  std::vector<int> ids(static_cast<std::size_t>(num_samples));
  std::iota(ids.begin(), ids.end(), 0);
  auto pipeline = dpipe::iter::from(std::move(ids))
                      .shuffle(/*buffer_size=*/64)
                      .sharding_filter()
                      .map([](int id) {
                        return Sample{id, {static_cast<float>(id) * 0.5F, static_cast<float>(id % 7)}};
                      })
                      .batch(16)
                      .prefetch(4);
  dpipe::graph::apply_sharding(pipeline.ptr(), /*num_instances=*/1, /*instance_id=*/0);
  return pipeline;
}
// [pipeline]

// [seed]
/// Seeds the pipeline's random nodes for `epoch`, as DataLoader2 does with seed(epoch).
void seed_epoch(const dpipe::IterPipe<std::vector<Sample>>& pipeline, std::uint64_t epoch) {
  dpipe::SeedGenerator seeds(epoch);
  dpipe::graph::set_graph_random_seed(pipeline.ptr(), seeds);
}
// [seed]

std::vector<int> ids_of(const std::vector<std::vector<Sample>>& batches) {
  std::vector<int> ids;
  for (const auto& batch : batches) {
    for (const auto& sample : batch) ids.push_back(sample.id);
  }
  return ids;
}

}  // namespace

int main() {
  constexpr int kSamples = 200;
  auto pipeline = build_pipeline(kSamples);
  std::printf(
      "pipeline: %d samples -> shuffle(64) -> sharding_filter -> map(make_sample) -> batch(16) -> prefetch(4)\n",
      kSamples);
  std::printf("graph, root first:");
  for (const auto& node : dpipe::graph::list_dps(dpipe::graph::traverse_dps(pipeline))) {
    std::printf(" %s", std::string(node->name()).c_str());
  }
  std::printf("\n");

  // Epoch 0, in full.
  seed_epoch(pipeline, 0);
  std::vector<std::vector<Sample>> epoch0;
  for (auto& batch : pipeline) epoch0.push_back(std::move(batch));
  const auto ids0 = ids_of(epoch0);
  std::printf("epoch 0: %zu batches, %zu samples, first ids %d %d %d %d\n", epoch0.size(), ids0.size(), ids0[0],
              ids0[1], ids0[2], ids0[3]);

  // [checkpoint]
  // Epoch 1: stop after 5 batches and checkpoint.
  seed_epoch(pipeline, 1);
  std::vector<std::vector<Sample>> seen;
  std::vector<std::byte> checkpoint;
  for (auto& batch : pipeline) {
    seen.push_back(std::move(batch));
    if (seen.size() == 5) {
      checkpoint = dpipe::graph::save_state(pipeline);
      break;
    }
  }
  // [checkpoint]
  std::printf("epoch 1: stopped after %zu batches (%zu samples), checkpoint of %zu bytes\n", seen.size(),
              ids_of(seen).size(), checkpoint.size());

  // [restore]
  // A new pipeline, built by the same code, restored from the checkpoint.
  auto resumed = build_pipeline(kSamples);
  dpipe::graph::load_state(resumed, checkpoint);
  std::vector<std::vector<Sample>> rest;
  for (auto& batch : resumed) rest.push_back(std::move(batch));  // continues the saved epoch
  // [restore]
  std::printf("resumed in a new pipeline: %zu more batches, %zu samples\n", rest.size(), ids_of(rest).size());

  // The same epoch without interruption, for comparison.
  auto reference = build_pipeline(kSamples);
  seed_epoch(reference, 1);
  std::vector<std::vector<Sample>> whole;
  for (auto& batch : reference) whole.push_back(std::move(batch));
  auto joined = ids_of(seen);
  const auto rest_ids = ids_of(rest);
  joined.insert(joined.end(), rest_ids.begin(), rest_ids.end());
  const bool identical = joined == ids_of(whole);
  std::printf("stopped + resumed == uninterrupted epoch 1: %s\n", identical ? "yes" : "NO");
  return identical ? 0 : 1;
}

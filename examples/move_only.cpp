// Elements the trainer owns through std::unique_ptr: made in a map after the source, carried
// through filter, shuffle and batch without a copy, across worker processes as their fields, and
// checkpointed in the middle of an epoch.

#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <dpipe/dpipe.hpp>

namespace {

// [move_only]
/// A sample held by std::unique_ptr; DPIPE_FIELDS lets it cross to the trainer from the workers.
struct Image {
  std::string name;
  std::vector<float> pixels;
  DPIPE_FIELDS(name, pixels)
};
using ImagePtr = std::unique_ptr<Image>;
using Batch = std::vector<ImagePtr>;

dpipe::DataLoader2<Batch> make_loader() {
  std::vector<int> ids(64);
  std::iota(ids.begin(), ids.end(), 0);
  auto pipeline = dpipe::iter::from(std::move(ids))  // the source holds plain ids...
                      .shuffle()
                      .sharding_filter()
                      .map([](int id) {  // ...and a map makes the move-only elements
                        return std::make_unique<Image>(Image{"img" + std::to_string(id), std::vector<float>(16, 0.5F)});
                      })
                      .filter([](const ImagePtr& image) { return !image->pixels.empty(); })
                      .batch(8);
  return dpipe::DataLoader2<Batch>(pipeline, dpipe::MultiProcessingReadingService({.num_workers = 2}));
}
// [move_only]

/// The names in a batch, joined.
std::string names(const Batch& batch) {
  std::string out;
  for (const auto& image : batch) out += image->name + " ";
  return out;
}

}  // namespace

int main() {
  auto loader = make_loader();
  loader.seed(3);
  std::vector<std::string> uninterrupted;
  std::vector<ImagePtr> kept;
  for (auto& batch : loader) {
    uninterrupted.push_back(names(batch));
    for (auto& image : batch) kept.push_back(std::move(image));  // the trainer may keep them: no copy
  }
  std::printf("%zu batches, %zu images kept\n", uninterrupted.size(), kept.size());

  // Stop after 3 batches of the same epoch, save, and resume in a new loader.
  auto stopped = make_loader();
  stopped.seed(3);
  std::size_t taken = 0;
  for (auto it = stopped.begin(); taken < 3 && it != stopped.end(); ++it) ++taken;
  auto resumed = make_loader();
  resumed.load_state_dict(stopped.state_dict());
  std::vector<std::string> rest;
  for (const auto& batch : resumed) rest.push_back(names(batch));
  const bool same = rest == std::vector<std::string>(uninterrupted.begin() + 3, uninterrupted.end());
  std::printf("resumed after 3 batches: %zu more, the same images: %s\n", rest.size(), same ? "yes" : "no");
}

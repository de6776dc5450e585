// DataLoader2 over move-only elements (std::unique_ptr to a user struct): in process, with
// InProcessReadingService and with worker processes, whole epochs and exact checkpoints.

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::DataLoader2;
using dpipe::testing::epoch;
using dpipe::testing::LogCapture;
using dpipe::testing::range;
using dpipe::testing::workers;

/// A user struct handed around by std::unique_ptr (crossing a process boundary as its fields).
struct Image {
  std::string name;
  std::vector<float> pixels;
  DPIPE_FIELDS(name, pixels)
};
using ImagePtr = std::unique_ptr<Image>;

ImagePtr load(int id) {
  return std::make_unique<Image>(Image{"img" + std::to_string(id), std::vector<float>(4, static_cast<float>(id))});
}
bool not_multiple_of_3(const ImagePtr& image) { return static_cast<int>(image->pixels[0]) % 3 != 0; }

std::string name_of(const ImagePtr& image) { return image->name; }
std::vector<std::string> names_of(const std::vector<ImagePtr>& batch) {
  std::vector<std::string> names;
  for (const auto& image : batch) names.push_back(image->name);
  return names;
}

/// from / map / filter / batch over 0 .. 11.
dpipe::IterPipe<std::vector<ImagePtr>> batches() {
  return iter::from(range(12)).sharding_filter().map(load).filter(not_multiple_of_3).batch(2);
}

TEST_CASE("move-only elements: DataLoader2 of unique_ptr batches in process and with 2 workers",
          "[loader][mp][move_only]") {
  const LogCapture quiet;  // no shuffle before sharding_filter: the linter's advice
  using Names = std::vector<std::vector<std::string>>;
  const Names in_process{{"img1", "img2"}, {"img4", "img5"}, {"img7", "img8"}, {"img10", "img11"}};
  {
    DataLoader2<std::vector<ImagePtr>> loader(batches());
    CHECK(epoch(loader, names_of) == in_process);
  }
  {
    DataLoader2<std::vector<ImagePtr>> loader(batches(), dpipe::InProcessReadingService(4));
    CHECK(epoch(loader, names_of) == in_process);
    CHECK(epoch(loader, names_of) == in_process);
  }
  // Worker 0 reads 0, 2, .., 10 and worker 1 reads 1, 3, .., 11; their batches alternate.
  DataLoader2<std::vector<ImagePtr>> loader(batches(), workers(2));
  const Names with_workers{{"img2", "img4"}, {"img1", "img5"}, {"img8", "img10"}, {"img7", "img11"}};
  CHECK(epoch(loader, names_of) == with_workers);
  CHECK(epoch(loader, names_of) == with_workers);
}

TEST_CASE("move-only elements: DataLoader2 of unique_ptr hands over the objects the pipeline made",
          "[loader][move_only]") {
  std::vector<const Image*> made;
  auto pipe = iter::from(range(5)).map([&made](int id) {
    auto image = load(id);
    made.push_back(image.get());
    return image;
  });
  DataLoader2<ImagePtr> loader(pipe);
  std::vector<ImagePtr> kept;
  for (auto& image : loader) kept.push_back(std::move(image));  // the trainer may take them
  REQUIRE(kept.size() == 5);
  for (std::size_t i = 0; i < kept.size(); ++i) CHECK(kept[i].get() == made[i]);  // moved, never copied
}

TEST_CASE("move-only elements: restore sweep of a shuffled unique_ptr pipeline in process and with workers",
          "[loader][mp][move_only][state]") {
  const auto make_pipe = [] {
    return iter::from(range(24)).shuffle(6).sharding_filter().map(load).filter(not_multiple_of_3);
  };
  const auto in_process =
      dpipe::testing::check_restore_sweep([&] { return DataLoader2<ImagePtr>(make_pipe()); }, name_of);
  CHECK(in_process.size() == 16);
  const auto two_workers =
      dpipe::testing::check_restore_sweep([&] { return DataLoader2<ImagePtr>(make_pipe(), workers(2)); }, name_of);
  CHECK(two_workers.size() == 16);
  const auto batched = dpipe::testing::check_restore_sweep(
      [&] { return DataLoader2<std::vector<ImagePtr>>(make_pipe().batch(3), workers(2)); }, names_of);
  CHECK(batched.size() == 6);  // each worker's 8 images: batches of 3, 3 and 2
}

}  // namespace

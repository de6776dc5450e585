// WebDataset beyond grouping: required suffixes (a shard cut at a member boundary, raised and
// skipped, restored mid-epoch), with their exact errors. Shards are written by libarchive's
// writer in a fresh directory per test.

#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/archive_writer.hpp"
#include "support/battery.hpp"
#include "support/data_error.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using dpipe::io::WebDatasetSample;
using dpipe::testing::TempDir;

/// The members of samples `first` to `last` ("002.txt" "caption 2", "002.cls" "2"), 1024 bytes
/// each in a ustar archive (a header block and a data block).
std::vector<dpipe::testing::ArchiveEntry> caption_members(int first, int last) {
  std::vector<dpipe::testing::ArchiveEntry> members;
  for (int sample = first; sample <= last; ++sample) {
    const auto key = "00" + std::to_string(sample);
    members.emplace_back(key + ".txt", "caption " + std::to_string(sample));
    members.emplace_back(key + ".cls", std::to_string(sample));
  }
  return members;
}

/// The sample `number` of shard `shard` as caption_members wrote it.
WebDatasetSample caption_sample(const std::string& shard, int number) {
  return {shard + "/00" + std::to_string(number),
          {{".txt", "caption " + std::to_string(number)}, {".cls", std::to_string(number)}}};
}

}  // namespace

TEST_CASE("webdataset refuses a sample without a required suffix: a shard cut at a member boundary", "[io]") {
  TempDir dir;
  const std::string cut = dir / "shard-0.tar";
  const std::string whole = dir / "shard-1.tar";
  dpipe::testing::write_archive(cut, "ustar", "none", caption_members(0, 2));
  dpipe::testing::write_archive(whole, "ustar", "none", caption_members(3, 4));
  fs::resize_file(cut, 5 * 1024);  // the end of "002.txt": "002.cls" and the end blocks are gone
  const auto make = [&](dpipe::io::WebDatasetOptions options) {
    return dpipe::iter::from(std::vector<std::string>{cut, whole}) | dpipe::io::open_files() |
           dpipe::io::load_from_tar() | dpipe::io::webdataset(std::move(options));
  };

  SECTION("without required suffixes the cut shard reads as whole") {
    const auto samples = dpipe::testing::collect(make({}));
    REQUIRE(samples.size() == 5);
    CHECK(samples[2] == WebDatasetSample{cut + "/002", {{".txt", "caption 2"}}});
  }
  SECTION("a DataError at the last sample of the cut shard, after the others") {
    const auto pipe = make({.required_suffixes = {".txt", ".cls"}});
    std::vector<WebDatasetSample> before;
    const auto message = dpipe::testing::data_error_of([&] {
      for (auto& sample : pipe) before.push_back(std::move(sample));
    });
    CHECK(message == pipe.ptr()->label() + ": '" + cut + "': the sample '002' lacks .cls (it has .txt)");
    CHECK(before == std::vector<WebDatasetSample>{caption_sample(cut, 0), caption_sample(cut, 1)});
  }
  SECTION("every missing suffix is named, alternatives as written") {
    const auto pipe = make({.required_suffixes = {".jpg;.png", ".txt", ".json"}});
    CHECK(dpipe::testing::data_error_of(pipe) ==
          pipe.ptr()->label() + ": '" + cut + "': the sample '000' lacks .jpg;.png, .json (it has .txt, .cls)");
  }
  SECTION("under skip the incomplete sample is dropped, and checkpoints keep the count") {
    const std::vector<WebDatasetSample> expected{caption_sample(cut, 0), caption_sample(cut, 1),
                                                 caption_sample(whole, 3), caption_sample(whole, 4)};
    const auto options =
        dpipe::io::WebDatasetOptions{.required_suffixes = {".cls;.json", ".txt"}, .on_error = dpipe::OnError::skip()};
    const auto pipe = make(options);
    CHECK(dpipe::testing::collect(pipe) == expected);
    CHECK(dynamic_cast<const dpipe::io::WebDatasetGrouper&>(*pipe.ptr()).skipped() == 1);
    dpipe::testing::check_battery([&] { return make(options); }, expected, std::nullopt);
  }
  SECTION("a budget of none raises at the incomplete sample") {
    const auto pipe = make({.required_suffixes = {".cls"}, .on_error = dpipe::OnError::skip(0)});
    CHECK_THROWS_AS(dpipe::testing::collect(pipe), dpipe::ElementError);
    CHECK_THROWS_WITH(dpipe::testing::collect(pipe),
                      pipe.ptr()->label() + ": '" + cut +
                          "': the sample '002' lacks .cls (it has .txt); that is 1 failed elements in this epoch, "
                          "more than the error budget of 0 (OnError::skip)");
  }
  SECTION("a required suffix without its '.' is refused") {
    CHECK_THROWS_WITH(make({.required_suffixes = {".jpg;png"}}),
                      "webdataset: the suffix '.jpg;png' does not start with '.' (write \".cls\", not \"cls\")");
  }
  SECTION("the required suffixes are a setting of the checkpoint") {
    CHECK(make({.required_suffixes = {".jpg;.png", ".cls"}}).ptr()->settings() ==
          dpipe::NodeSettings{{"required_suffixes", ".jpg;.png,.cls"}});
    CHECK(make({}).ptr()->settings().empty());
  }
}

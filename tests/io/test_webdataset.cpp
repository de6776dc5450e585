// WebDataset beyond grouping: required suffixes (a shard cut at a member boundary, raised and
// skipped, restored mid-epoch), and the helpers on samples: rename_fields, decode_fields and
// to_tuple, with their exact errors, in process and in two workers. Shards are written by
// libarchive's writer in a fresh directory per test.

#include <filesystem>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/archive_writer.hpp"
#include "support/battery.hpp"
#include "support/data_error.hpp"
#include "support/io_workers.hpp"
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

using Field = std::variant<std::string, int>;

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
  SECTION("a checkpoint written before the skip count existed restores, with none skipped") {
    const auto pipe = make({});
    (void)dpipe::testing::take(pipe, 2);
    const auto saved = dpipe::StateStore::from_blob(dpipe::graph::save_state(pipe));
    dpipe::StateStore older;  // the same checkpoint as a dpipe before the count wrote it
    for (const auto& field : saved.fields()) {
      if (field.key.ends_with("webdataset:skipped")) continue;
      older.add(field.key, field.kind).value = field.value;
    }
    REQUIRE(older.fields().size() + 1 == saved.fields().size());
    const auto restored = make({});
    dpipe::graph::load_state(restored, older.to_blob());
    CHECK(dpipe::testing::collect(restored) ==
          std::vector<WebDatasetSample>{WebDatasetSample{cut + "/002", {{".txt", "caption 2"}}},
                                        caption_sample(whole, 3), caption_sample(whole, 4)});
    CHECK(dynamic_cast<const dpipe::io::WebDatasetGrouper&>(*restored.ptr()).skipped() == 0);
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

TEST_CASE("webdataset groups a member whose suffix names alternatives by its exact suffix", "[io]") {
  TempDir dir;
  const std::string shard = dir / "shard-0.tar";
  dpipe::testing::write_archive(shard, "ustar", "none", {{"000.a", "1"}, {"000.a;b", "2"}, {"000.a", "3"}});
  const auto samples =
      dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{shard}) | dpipe::io::open_files() |
                              dpipe::io::load_from_tar() | dpipe::io::webdataset());
  CHECK(samples == std::vector<WebDatasetSample>{{shard + "/000", {{".a", "3"}, {".a;b", "2"}}}});
}

TEST_CASE("rename_fields gives fields aliases as webdataset's rename does", "[io]") {
  const auto rename = dpipe::io::rename_fields({{".image", ".jpg;.png"}, {".label", ".cls"}});
  const WebDatasetSample sample{"a.tar/000", {{".png", "p"}, {".json", "m"}, {".cls", "0"}, {".label", "old"}}};
  CHECK(rename(sample) == WebDatasetSample{"a.tar/000", {{".json", "m"}, {".image", "p"}, {".label", "0"}}});
  // Both alternatives leave the sample; the first one present is taken.
  CHECK(rename(WebDatasetSample{"a.tar/001", {{".png", "p"}, {".jpg", "j"}, {".cls", "1"}}}) ==
        WebDatasetSample{"a.tar/001", {{".image", "j"}, {".label", "1"}}});
  // Two aliases of one field both get its bytes.
  CHECK(dpipe::io::rename_fields({{".a", ".cls"}, {".b", ".cls"}})(WebDatasetSample{"k", {{".cls", "7"}}}) ==
        WebDatasetSample{"k", {{".a", "7"}, {".b", "7"}}});
  CHECK_THROWS_AS(rename(WebDatasetSample{"a.tar/002", {{".cls", "2"}}}), dpipe::KeyError);
  CHECK_THROWS_WITH(rename(WebDatasetSample{"a.tar/002", {{".cls", "2"}}}),
                    "webdataset: the sample 'a.tar/002' has no field '.jpg;.png' (it has .cls)");
  CHECK_THROWS_WITH(dpipe::io::rename_fields({{".image", "jpg;png"}}),
                    "rename_fields: the suffix 'jpg;png' does not start with '.' (write \".cls\", not \"cls\")");
  CHECK_THROWS_WITH(dpipe::io::rename_fields({{".a;.b", ".jpg"}}),
                    "rename_fields: the suffix '.a;.b' names alternatives (';'); name one suffix");
}

TEST_CASE("decode_fields decodes each field by its suffix", "[io]") {
  const auto decode =
      dpipe::io::decode_fields<Field>({{".txt", [](const std::string& bytes) { return bytes + "!"; }},
                                       {".cls", [](const std::string& bytes) { return std::stoi(bytes); }}});
  const WebDatasetSample sample{"a.tar/000", {{".cls", "7"}, {".json", "{}"}, {".txt", "cap"}}};
  const auto decoded = decode(sample);
  CHECK(decoded == dpipe::io::BasicWebDatasetSample<Field>{"a.tar/000", {{".cls", Field(7)}, {".txt", Field("cap!")}}});
  CHECK(std::get<int>(decoded[".cls"]) == 7);
  // Decoded samples cross process boundaries as the raw ones do.
  CHECK(dpipe::from_bytes<dpipe::io::BasicWebDatasetSample<Field>>(dpipe::to_bytes(decoded)) == decoded);
  // A decoder's exception passes through.
  CHECK_THROWS_AS(decode(WebDatasetSample{"a.tar/001", {{".cls", "x"}}}), std::invalid_argument);
  CHECK_THROWS_WITH(dpipe::io::decode_fields<int>({{"cls", [](const std::string&) { return 0; }}}),
                    "decode_fields: the suffix 'cls' does not start with '.' (write \".cls\", not \"cls\")");
}

TEST_CASE("to_tuple takes fields out as a tuple", "[io]") {
  const WebDatasetSample sample{"a.tar/000", {{".png", "p"}, {".cls", "0"}}};
  CHECK(dpipe::io::to_tuple(".jpg;.png", ".cls")(sample) == std::tuple<std::string, std::string>{"p", "0"});
  CHECK(dpipe::io::to_tuple(".cls", ".cls")(sample) == std::tuple<std::string, std::string>{"0", "0"});
  CHECK_THROWS_AS(dpipe::io::to_tuple(".cls", ".jpg")(sample), dpipe::KeyError);
  CHECK_THROWS_WITH(dpipe::io::to_tuple(".cls", ".jpg")(sample),
                    "webdataset: the sample 'a.tar/000' has no field '.jpg' (it has .png, .cls)");
  const dpipe::io::BasicWebDatasetSample<Field> decoded{"a.tar/000", {{".txt", Field("cap")}, {".cls", Field(7)}}};
  CHECK(dpipe::io::to_tuple<std::string, int>(".txt", ".cls")(decoded) == std::tuple<std::string, int>{"cap", 7});
  CHECK(dpipe::io::to_tuple(".cls")(decoded) == std::tuple<Field>{Field(7)});
  const auto ints = dpipe::io::to_tuple<int, int>(".txt", ".cls");
  CHECK_THROWS_AS(ints(decoded), dpipe::InvalidArgument);
  CHECK_THROWS_WITH(ints(decoded),
                    "webdataset: the field '.txt' of the sample 'a.tar/000' holds another type than int");
  CHECK_THROWS_WITH(dpipe::io::to_tuple("cls"),
                    "to_tuple: the suffix 'cls' does not start with '.' (write \".cls\", not \"cls\")");
}

TEST_CASE("webdataset helpers in a pipeline skip incomplete samples in process and in two workers", "[io]") {
  TempDir dir;
  const std::string gap = dir / "shard-0.tar";
  const std::string cut = dir / "shard-1.tar";
  auto members = caption_members(0, 2);
  members.erase(members.begin() + 2);  // "001.txt"
  dpipe::testing::write_archive(gap, "ustar", "none", members);
  dpipe::testing::write_archive(cut, "ustar", "none", caption_members(3, 5));
  fs::resize_file(cut, 5 * 1024);  // the end of "005.txt"
  const auto pipeline = [&] {
    return dpipe::iter::from(std::vector<std::string>{gap, cut}) | dpipe::iter::shuffle() |
           dpipe::iter::sharding_filter() | dpipe::io::open_files() | dpipe::io::load_from_tar() |
           dpipe::io::webdataset({.required_suffixes = {".cls"}, .on_error = dpipe::OnError::skip()}) |  // 005
           dpipe::iter::map(dpipe::io::rename_fields({{".caption", ".txt"}}), dpipe::OnError::skip()) |  // 001
           dpipe::iter::map(
               dpipe::io::decode_fields<Field>({{".caption", [](const std::string& bytes) { return bytes; }},
                                                {".cls", [](const std::string& bytes) { return std::stoi(bytes); }}})) |
           dpipe::iter::map(dpipe::io::to_tuple<std::string, int>(".caption", ".cls"));
  };
  const std::vector<std::tuple<std::string, int>> expected{
      {"caption 0", 0}, {"caption 2", 2}, {"caption 3", 3}, {"caption 4", 4}};
  CHECK(dpipe::testing::sorted(dpipe::testing::collect(pipeline())) == expected);
  dpipe::testing::check_workers(pipeline, expected);
}

// The I/O wing's archive and compression nodes: shard_expand, decompress, load_from_tar,
// load_from_zip, webdataset. Archives and compressed files are written by libarchive's writer
// in a fresh directory per test; the standard battery; truncated and corrupt data with exact
// messages; members over the size limit; checkpoints inside plain and compressed archives.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/archive_writer.hpp"
#include "support/battery.hpp"
#include "support/loader.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using dpipe::DataError;
using dpipe::io::PathBytes;
using dpipe::testing::TempDir;

/// Cuts `path` to its first `size` bytes.
void truncate_to(const std::string& path, std::uintmax_t size) { fs::resize_file(path, size); }

/// The message of the DataError `run` throws.
template <class Run>
std::string data_error_of(Run run) {
  try {
    run();
  } catch (const DataError& error) {
    return error.what();
  }
  FAIL("no DataError");
  return {};
}

}  // namespace

TEST_CASE("shard_expand expands brace ranges as torchdata does", "[io]") {
  using dpipe::io::expand_shards;
  CHECK(expand_shards("train.tar") == std::vector<std::string>{"train.tar"});
  CHECK(expand_shards("s-{000..003}.tar") ==
        std::vector<std::string>{"s-000.tar", "s-001.tar", "s-002.tar", "s-003.tar"});
  CHECK(expand_shards("{8..10}") == std::vector<std::string>{"8", "9", "10"});
  CHECK(expand_shards("{0..2}") == std::vector<std::string>{"0", "1", "2"});
  CHECK(expand_shards("{08..10}") == std::vector<std::string>{"08", "09", "10"});
  CHECK(expand_shards("a{1..2}-{01..02}{x}") ==
        std::vector<std::string>{"a1-01{x}", "a1-02{x}", "a2-01{x}", "a2-02{x}"});
  CHECK_THROWS_WITH(expand_shards("s-{3..3}.tar"), "shard_expand: bad range in in shard spec s-{3..3}.tar.");
  CHECK_THROWS_WITH(expand_shards("{100..20}"), "shard_expand: low bound must be shorter than high bound");
  CHECK_THROWS_WITH(expand_shards("{01..100}"),
                    "shard_expand: low bound must not start with 0 if low bound is shorter");
  CHECK_THROWS_AS(expand_shards("{1..99999999999999999999999}"), dpipe::InvalidArgument);
  // The widest range a uint64_t holds: its count wraps to 0 and its loop would never end.
  CHECK_THROWS_WITH(expand_shards("s-{0..18446744073709551615}.tar"),
                    "shard_expand: shard spec s-{0..18446744073709551615}.tar names more than 1000000 shards");
  CHECK_THROWS_WITH(expand_shards("{1..1000001}"),
                    "shard_expand: shard spec {1..1000001} names more than 1000000 shards");
  CHECK_THROWS_WITH(expand_shards("{1..1000}-{1..1001}"),
                    "shard_expand: shard spec {1..1000}-{1..1001} names more than 1000000 shards");
  CHECK(expand_shards("{1..1000000}").size() == 1'000'000);
  CHECK(expand_shards("{1..1000}-{1..1000}").back() == "1000-1000");

  dpipe::testing::check_battery(
      [] {
        return dpipe::iter::from(std::vector<std::string>{"a-{1..3}", "b", "c-{07..09}"}) | dpipe::io::shard_expand();
      },
      std::vector<std::string>{"a-1", "a-2", "a-3", "b", "c-07", "c-08", "c-09"}, std::nullopt);
}

TEST_CASE("decompress reads gzip bz2 xz lzma and zstd files under readlines", "[io]") {
  TempDir dir;
  const std::string text = "first\nsecond\nthird\n";
  std::vector<std::string> paths;
  for (const auto& [filter, extension] : std::vector<std::pair<std::string, std::string>>{
           {"gzip", ".gz"}, {"bzip2", ".bz2"}, {"xz", ".xz"}, {"lzma", ".lzma"}, {"zstd", ".zst"}}) {
    paths.push_back(dir / ("lines" + extension));
    dpipe::testing::write_compressed(paths.back(), filter, text);
  }
  std::vector<std::string> expected;
  for (std::size_t file = 0; file < paths.size(); ++file)
    for (const char* line : {"first", "second", "third"}) expected.emplace_back(line);
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::decompress() |
               dpipe::io::readlines({}, dpipe::io::lines_only);
      },
      expected, std::nullopt);

  SECTION("a format given for a file without an extension") {
    const std::string plain = dir / "lines";
    fs::copy_file(paths[0], plain);
    CHECK(dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{plain}) | dpipe::io::open_files() |
                                  dpipe::io::decompress({.format = dpipe::io::Compression::kGzip}) |
                                  dpipe::io::readlines({}, dpipe::io::lines_only)) ==
          std::vector<std::string>{"first", "second", "third"});
    CHECK_THAT(data_error_of([&] {
                 (void)dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{plain}) |
                                               dpipe::io::open_files() | dpipe::io::decompress());
               }),
               Catch::Matches("decompress#[0-9]+: '" + plain +
                              "': cannot tell the compression from the extension \\(.gz, .tgz, .bz2, .xz, .lzma, "
                              ".zst, .zstd\\); give it in the options"));
  }
}

TEST_CASE("decompress refuses what is not its format and reports a corrupt stream where it breaks", "[io]") {
  TempDir dir;
  const std::string not_gzip = dir.write("plain.gz", "just text\n");
  CHECK_THAT(data_error_of([&] {
               (void)dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{not_gzip}) |
                                             dpipe::io::open_files() | dpipe::io::decompress());
             }),
             Catch::Matches("decompress#[0-9]+: '" + not_gzip + "': not a gzip stream"));

  std::string big;
  for (int line = 0; line < 20000; ++line) big += "line " + std::to_string(line) + " of a compressible text\n";
  const std::string cut = dir / "cut.gz";
  dpipe::testing::write_compressed(cut, "gzip", big);
  truncate_to(cut, fs::file_size(cut) / 2);
  const auto readlines_of = [&](const std::string& path, dpipe::io::DecompressOptions options) {
    return dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files() |
           dpipe::io::decompress(options) | dpipe::io::readlines({}, dpipe::io::lines_only);
  };
  const auto message = data_error_of([&] { (void)dpipe::testing::collect(readlines_of(cut, {})); });
  CHECK_THAT(message, Catch::Matches("readlines#[0-9]+: '" + cut + "' byte offset [0-9]+: truncated gzip input"));

  SECTION("max_bytes stops a file that decompresses to more") {
    const std::string bomb = dir / "bomb.gz";
    dpipe::testing::write_compressed(bomb, "gzip", std::string(1 << 20, '\n'));
    CHECK_THAT(data_error_of([&] { (void)dpipe::testing::collect(readlines_of(bomb, {.max_bytes = 100000})); }),
               Catch::Matches("readlines#[0-9]+: '" + bomb +
                              "' byte offset [0-9]+: decompresses to more than max_bytes \\(100000\\) bytes"));
  }
}

TEST_CASE("readlines restores inside a compressed file by decompressing only that file", "[io]") {
  TempDir dir;
  const std::string first = dir / "a.txt.zst";
  const std::string second = dir / "b.txt.gz";
  dpipe::testing::write_compressed(first, "zstd", "a1\na2\n");
  dpipe::testing::write_compressed(second, "gzip", "b1\nb2\nb3\nb4\n");
  const auto make = [&] {
    return dpipe::iter::from(std::vector<std::string>{first, second}) | dpipe::io::open_files() |
           dpipe::io::decompress() | dpipe::io::readlines({}, dpipe::io::lines_only);
  };
  const auto pipe = make();
  (void)dpipe::testing::take(pipe, 4);
  const auto blob = dpipe::graph::save_state(pipe);
  fs::remove(first);  // nothing reads it again
  const auto restored = make();
  dpipe::graph::load_state(restored, blob);
  CHECK(dpipe::testing::collect(restored) == std::vector<std::string>{"b3", "b4"});
}

TEST_CASE("load_from_tar yields each regular member with the archive's path joined", "[io]") {
  TempDir dir;
  const std::string plain = dir / "plain.tar";
  const std::string packed = dir / "packed.tar.xz";
  dpipe::testing::write_archive(plain, "ustar", "none",
                                {{"data/", ""}, {"data/a.txt", "alpha"}, {"./data/b.bin", std::string("\0\1\2", 3)}});
  dpipe::testing::write_archive(packed, "pax", "xz", {{"c.txt", std::string(100000, 'c')}, {"empty", ""}});
  const std::vector<PathBytes> expected{{plain + "/data/a.txt", "alpha"},
                                        {plain + "/data/b.bin", std::string("\0\1\2", 3)},
                                        {packed + "/c.txt", std::string(100000, 'c')},
                                        {packed + "/empty", ""}};
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(std::vector<std::string>{plain, packed}) | dpipe::io::open_files() |
               dpipe::io::load_from_tar();
      },
      expected, std::nullopt);
}

TEST_CASE("load_from_zip yields each member of a zip", "[io]") {
  TempDir dir;
  const std::string zip = dir / "set.zip";
  dpipe::testing::write_archive(zip, "zip", "none",
                                {{"dir/", ""}, {"dir/x.txt", std::string(5000, 'x')}, {"y", "why"}});
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(std::vector<std::string>{zip}) | dpipe::io::open_files() | dpipe::io::load_from_zip();
      },
      std::vector<PathBytes>{{zip + "/dir/x.txt", std::string(5000, 'x')}, {zip + "/y", "why"}}, std::nullopt);
}

TEST_CASE("load_from_tar restores at a member without reading the archives before it", "[io]") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> archives{
      {"a.tar", "none"}, {"b.tar", "none"}, {"c.tar.gz", "gzip"}};
  std::vector<std::string> paths;
  for (const auto& archive : archives) paths.push_back(dir / archive.first);
  const auto write_archives = [&] {
    for (std::size_t index = 0; index < archives.size(); ++index) {
      std::vector<dpipe::testing::ArchiveEntry> entries;
      for (int member = 0; member < 4; ++member)  // long names: GNU long-name headers before each member
        entries.emplace_back(std::string(120, 'n') + std::to_string(member),
                             archives[index].first + std::to_string(member));
      dpipe::testing::write_archive(paths[index], "gnutar", archives[index].second, entries);
    }
  };
  const auto make = [&] { return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::load_from_tar(); };
  for (const std::size_t taken : {std::size_t{6}, std::size_t{10}}) {
    INFO("after " << taken << " members");
    write_archives();
    const auto pipe = make();
    (void)dpipe::testing::take(pipe, taken);
    const auto blob = dpipe::graph::save_state(pipe);
    std::ofstream(paths[0], std::ios::trunc) << "gone";  // nothing reads it again
    const auto restored = make();
    dpipe::graph::load_state(restored, blob);
    std::vector<std::string> rest;
    for (auto& [path, bytes] : dpipe::testing::collect(restored)) rest.push_back(bytes);
    std::vector<std::string> expected;
    for (std::size_t index = taken; index < 12; ++index)
      expected.push_back(std::string(index < 4   ? "a.tar"
                                     : index < 8 ? "b.tar"
                                                 : "c.tar.gz") +
                         std::to_string(index % 4));
    CHECK(rest == expected);
  }
  SECTION("an archive that changed since the checkpoint is refused") {
    write_archives();
    const auto pipe = make();
    (void)dpipe::testing::take(pipe, 6);
    const auto blob = dpipe::graph::save_state(pipe);
    dpipe::testing::write_archive(paths[1], "gnutar", "none", {{"other", "x"}});
    try {
      dpipe::graph::load_state(make(), blob);
      FAIL("no StateError");
    } catch (const dpipe::StateError& error) {
      CHECK_THAT(error.what(), Catch::Matches("load_from_tar#[0-9]+: cannot continue the archive the checkpoint was "
                                              "reading: .*"));
    }
  }
}

TEST_CASE("load_from_tar names the archive and member of bad data and skips only what is bad", "[io]") {
  TempDir dir;
  const std::string big = dir / "big.tar";
  const std::string cut = dir / "cut.tar";
  const std::string good = dir / "good.tar";
  dpipe::testing::write_archive(big, "ustar", "none",
                                {{"small", "s"}, {"large", std::string(5000, 'L')}, {"next", "n"}});
  dpipe::testing::write_archive(cut, "ustar", "none",
                                {{"one", std::string(3000, '1')}, {"two", std::string(3000, '2')}});
  truncate_to(cut, 512 + 3072 + 512 + 1000);  // inside the data of "two"
  dpipe::testing::write_archive(good, "ustar", "none", {{"g", "good"}});
  const auto make = [&](dpipe::OnError on_error, std::vector<std::string> paths) {
    return dpipe::iter::from(std::move(paths)) | dpipe::io::open_files() |
           dpipe::io::load_from_tar({.max_member_bytes = 4096, .on_error = on_error});
  };
  CHECK_THAT(data_error_of([&] { (void)dpipe::testing::collect(make({}, {big})); }),
             Catch::Matches("load_from_tar#[0-9]+: '" + big +
                            "' member 'large' byte offset 1024: the member has 5000 bytes, more than "
                            "max_member_bytes \\(4096\\)"));
  CHECK_THAT(data_error_of([&] { (void)dpipe::testing::collect(make({}, {cut})); }),
             Catch::Matches("load_from_tar#[0-9]+: '" + cut + "' member 'two' byte offset 3584: .*[Tt]runcated.*"));
  const auto skipping = make(dpipe::OnError::skip(), {big, cut, good});
  std::vector<std::string> names;
  for (auto& [path, bytes] : dpipe::testing::collect(skipping)) names.push_back(fs::path(path).filename().string());
  CHECK(names == std::vector<std::string>{"small", "next", "one", "g"});
  CHECK(dynamic_cast<const dpipe::io::ArchiveLoader&>(*skipping.ptr()).skipped() == 2);
}

TEST_CASE("webdataset groups members by key into samples", "[io]") {
  TempDir dir;
  const std::string shard0 = dir / "shard-0.tar";
  const std::string shard1 = dir / "shard-1.tar";
  dpipe::testing::write_archive(shard0, "ustar", "none",
                                {{"000.jpg", "j0"},
                                 {"000.cls", "0"},
                                 {"README", "metadata"},
                                 {"001.jpg", "j1"},
                                 {"001.seg.png", "p1"},
                                 {"001.cls", "1"}});
  dpipe::testing::write_archive(shard1, "ustar", "none",
                                {{"sub/002.jpg", "j2"}, {"sub/002.cls", "x"}, {"sub/002.cls", "2"}});
  using Sample = dpipe::io::WebDatasetSample;
  const std::vector<Sample> expected{
      {shard0 + "/000", {{".jpg", "j0"}, {".cls", "0"}}},
      {shard0 + "/001", {{".jpg", "j1"}, {".seg.png", "p1"}, {".cls", "1"}}},
      {shard1 + "/sub/002", {{".jpg", "j2"}, {".cls", "2"}}},
  };
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(std::vector<std::string>{shard0, shard1}) | dpipe::io::open_files() |
               dpipe::io::load_from_tar() | dpipe::io::webdataset();
      },
      expected, std::nullopt);
  CHECK(expected[1][".seg.png"] == "p1");
  CHECK(expected[1].find(".txt") == nullptr);
  CHECK_THROWS_WITH(expected[0][".txt"],
                    "webdataset: the sample '" + shard0 + "/000' has no field '.txt' (it has .jpg, .cls)");
  CHECK(dpipe::io::webdataset_split("a.tar/dir.v2/x.seg.png") ==
        std::pair<std::string, std::string>{"a.tar/dir.v2/x", ".seg.png"});
  CHECK(dpipe::io::webdataset_split("a\\b") == std::pair<std::string, std::string>{"a/b", ""});
}

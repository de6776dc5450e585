// The I/O wing's archive and compression nodes: shard_expand, decompress, load_from_tar,
// load_from_zip, webdataset. Archives and compressed files are written by libarchive's writer
// in a fresh directory per test; the standard battery; truncated and corrupt data with exact
// messages; members over the size limit; checkpoints inside plain and compressed archives.

#include <algorithm>
#include <array>
#include <clocale>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/archive_writer.hpp"
#include "support/battery.hpp"
#include "support/data_error.hpp"
#include "support/io_workers.hpp"
#include "support/loader.hpp"
#include "support/temp_dir.hpp"
#include "support/zip_writer.hpp"

namespace {

namespace fs = std::filesystem;
using dpipe::DataError;
using dpipe::io::PathBytes;
using dpipe::testing::TempDir;

/// Cuts `path` to its first `size` bytes.
void truncate_to(const std::string& path, std::uintmax_t size) { fs::resize_file(path, size); }

using dpipe::testing::data_error_of;

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
  CHECK_THAT(message, Catch::Matches("readlines#[0-9]+: '" + cut +
                                     "' byte offset [0-9]+: truncated gzip stream: it ends inside a member"));

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

namespace {

/// Flips the bits of `count` bytes at `offset` of `path` (from its end when negative).
void flip_byte(const std::string& path, std::int64_t offset, std::int64_t count = 1) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto size = static_cast<std::int64_t>(fs::file_size(path));
  for (auto at = offset < 0 ? size + offset : offset; count > 0; ++at, --count) {
    file.seekg(at);
    const char byte = static_cast<char>(file.get());
    file.seekp(at);
    file.put(static_cast<char>(~byte));
  }
}

/// `size` bytes no compressor shrinks, the same for the same seed.
std::string noise(std::size_t size, std::uint32_t seed) {
  std::minstd_rand random(seed);
  std::string bytes(size, '\0');
  for (auto& byte : bytes) byte = static_cast<char>(random() & 0xff);
  return bytes;
}

/// The offset of the header of the second block of the zstd frame in `path` (RFC 8878 §3.1.1).
std::int64_t second_zstd_block(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto byte = [&](std::size_t at) { return static_cast<unsigned>(static_cast<unsigned char>(bytes.at(at))); };
  const unsigned descriptor = byte(4);
  const bool single_segment = (descriptor & 0x20U) != 0;
  const std::size_t dictionary_bytes = std::array<std::size_t, 4>{0, 1, 2, 4}[descriptor & 3U];
  const std::size_t size_flag = descriptor >> 6U;
  const std::size_t content_size_bytes = size_flag == 0 ? (single_segment ? 1 : 0) : std::size_t{1} << size_flag;
  const std::size_t first = 5 + (single_segment ? 0 : 1) + dictionary_bytes + content_size_bytes;
  const unsigned header = byte(first) | (byte(first + 1) << 8U) | (byte(first + 2) << 16U);
  const unsigned type = (header >> 1U) & 3U;
  const std::size_t size = header >> 3U;
  REQUIRE((header & 1U) == 0);                                           // not the last block
  return static_cast<std::int64_t>(first + 3 + (type == 1 ? 1 : size));  // an RLE block holds one byte
}

/// The bytes of `path`.
std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("decompress checks the gzip trailer and reads concatenated members", "[io]") {
  TempDir dir;
  const auto lines_of = [](const std::string& path, dpipe::OnError on_error = {}) {
    return dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files() | dpipe::io::decompress() |
           dpipe::io::readlines({.on_error = on_error}, dpipe::io::lines_only);
  };
  const std::string crc = dir / "crc.gz";
  dpipe::testing::write_compressed(crc, "gzip", "first\nsecond\n");
  flip_byte(crc, -8);  // the trailer's CRC32: the deflate data still inflates
  CHECK_THAT(
      data_error_of(lines_of(crc)),
      Catch::Matches("readlines#[0-9]+: '" + crc + "' byte offset 0: corrupt gzip stream: incorrect data check"));
  const std::string size = dir / "size.gz";
  dpipe::testing::write_compressed(size, "gzip", "first\nsecond\n");
  flip_byte(size, -1);  // the trailer's ISIZE
  CHECK_THAT(
      data_error_of(lines_of(size)),
      Catch::Matches("readlines#[0-9]+: '" + size + "' byte offset 0: corrupt gzip stream: incorrect length check"));

  SECTION("a flipped byte inside the compressed data of a long stream") {
    std::string text;
    for (int line = 0; line < 50000; ++line) text += "line " + std::to_string(line * 7919 % 100003) + "\n";
    const std::string flipped = dir / "flipped.gz";
    dpipe::testing::write_compressed(flipped, "gzip", text);
    flip_byte(flipped, static_cast<std::int64_t>(fs::file_size(flipped) / 2));
    CHECK_THAT(data_error_of(lines_of(flipped)),
               Catch::Matches("readlines#[0-9]+: '" + flipped + "' byte offset [0-9]+: corrupt gzip stream: .*"));
  }
  SECTION("concatenated members and zero padding read as one stream, as gzip -d reads them") {
    const std::string a = dir / "a.gz";
    const std::string b = dir / "b.gz";
    dpipe::testing::write_compressed(a, "gzip", "a1\na2\n");
    dpipe::testing::write_compressed(b, "gzip", "b1\n");
    const std::string joined = dir.write("joined.gz", bytes_of(a) + bytes_of(b) + std::string(10, '\0'));
    CHECK(dpipe::testing::collect(lines_of(joined)) == std::vector<std::string>{"a1", "a2", "b1"});
    const std::string trailing = dir.write("trailing.gz", bytes_of(a) + "junk");
    CHECK_THAT(data_error_of(lines_of(trailing)),
               Catch::Matches("readlines#[0-9]+: '" + trailing +
                              "' byte offset 6: corrupt gzip stream: incorrect header check"));
  }
  SECTION("with OnError::skip readlines loses the corrupt file's rest, and decompress skips what is not gzip") {
    const std::string good = dir / "good.gz";
    dpipe::testing::write_compressed(good, "gzip", "g1\ng2\n");
    const std::string plain = dir.write("plain.gz", "not compressed\n");
    const auto pipe = dpipe::iter::from(std::vector<std::string>{crc, plain, good}) | dpipe::io::open_files() |
                      dpipe::io::decompress({.on_error = dpipe::OnError::skip()});
    const auto lines = pipe | dpipe::io::readlines({.on_error = dpipe::OnError::skip()}, dpipe::io::lines_only);
    CHECK(dpipe::testing::collect(lines) == std::vector<std::string>{"g1", "g2"});
    CHECK(dynamic_cast<const dpipe::io::Decompressor&>(*pipe.ptr()).skipped() == 1);
    CHECK(dynamic_cast<const dpipe::io::LineReader<std::string>&>(*lines.ptr()).skipped() == 1);
  }
}

TEST_CASE("decompress reports corrupt bz2 xz and zstd streams where the checked bytes end", "[io]") {
  TempDir dir;
  std::string text;
  for (int line = 0; line < 50000; ++line) text += "line " + std::to_string(line * 7919 % 100003) + "\n";
  for (const auto& [filter, extension, reason] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"bzip2", ".bz2", "bzip decompression failed"},
           {"xz", ".xz", "Lzma library error: Corrupted input data"},
           {"zstd", ".zst", "Zstd decompression failed: Unknown frame descriptor"}}) {
    INFO(filter);
    const std::string path = dir / ("corrupt" + extension);
    dpipe::testing::write_compressed(path, filter, text);
    // bz2 and xz check every block's CRC. libarchive writes zstd frames without a content
    // checksum, so a flip inside their data may pass: this one makes the second block's type
    // the reserved one.
    flip_byte(path, filter == "zstd" ? second_zstd_block(path) : static_cast<std::int64_t>(fs::file_size(path) / 2));
    const auto lines = dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files() |
                       dpipe::io::decompress() | dpipe::io::readlines({}, dpipe::io::lines_only);
    // The stream is held back whole: nothing of it was passed on.
    CHECK_THAT(data_error_of(lines), Catch::Matches("readlines#[0-9]+: '" + path + "' byte offset 0: " + reason));
  }
}

TEST_CASE("load_from_tar yields no member of a gzip-compressed tar before its trailer is checked", "[io]") {
  TempDir dir;
  const std::string tgz = dir / "set.tar.gz";
  dpipe::testing::write_archive(tgz, "ustar", "gzip", {{"a", "alpha"}, {"b", noise(1 << 20, 1)}});
  flip_byte(tgz, -8);  // the CRC32 of the trailer: every byte inflates as written
  const auto members =
      dpipe::iter::from(std::vector<std::string>{tgz}) | dpipe::io::open_files() | dpipe::io::load_from_tar();
  // The gzip member (the whole tar) is held back until its trailer: libarchive meets the error
  // while it opens the tar, before member 'a' is yielded.
  std::vector<std::string> yielded;
  CHECK_THAT(data_error_of([&] {
               for (auto& member : members) yielded.push_back(member.first);
             }),
             Catch::Matches("load_from_tar#[0-9]+: '" + tgz + "': corrupt gzip stream: incorrect data check"));
  CHECK(yielded.empty());
  const std::string cut = dir / "cut.tar.gz";
  std::string big;
  for (int line = 0; line < 20000; ++line) big += std::to_string(line * 7919 % 100003) + "\n";
  dpipe::testing::write_archive(cut, "ustar", "gzip", {{"small", "s"}, {"big", big}});
  truncate_to(cut, fs::file_size(cut) / 2);
  CHECK_THAT(data_error_of(dpipe::iter::from(std::vector<std::string>{cut}) | dpipe::io::open_files() |
                           dpipe::io::load_from_tar()),
             Catch::Matches("load_from_tar#[0-9]+: '" + cut + "': truncated gzip stream: it ends inside a member"));
}

TEST_CASE("load_from_zip reports truncated corrupt and oversized members and skips only them", "[io]") {
  TempDir dir;
  const std::string zip = dir / "set.zip";
  // Noise: the deflated members are as long as the plain ones, so the offsets below fall in them.
  dpipe::testing::write_archive(zip, "zip", "none", {{"a.txt", noise(3000, 1)}, {"big", noise(9000, 2)}, {"c", "c"}});
  const auto bytes = bytes_of(zip);
  const std::string local_header("PK\3\4", 4);
  const auto big_header = bytes.find(local_header, 1);
  const auto members = [&](std::vector<std::string> paths, dpipe::OnError on_error = {}) {
    return dpipe::iter::from(std::move(paths)) | dpipe::io::open_files() |
           dpipe::io::load_from_zip({.max_member_bytes = 8192, .on_error = on_error});
  };
  CHECK_THAT(
      data_error_of(members({zip})),
      Catch::Matches("load_from_zip#[0-9]+: '" + zip + "' member 'big' byte offset " + std::to_string(big_header) +
                     ": the member has 9000 bytes, more than max_member_bytes \\(8192\\)"));
  const std::string good = dir / "good.zip";
  dpipe::testing::write_archive(good, "zip", "none", {{"g", "good"}});
  const auto skipping = members({zip, good}, dpipe::OnError::skip());
  std::vector<std::string> names;
  for (auto& [path, member] : dpipe::testing::collect(skipping)) names.push_back(fs::path(path).filename().string());
  CHECK(names == std::vector<std::string>{"a.txt", "c", "g"});  // the member alone is skipped
  CHECK(dynamic_cast<const dpipe::io::ArchiveLoader&>(*skipping.ptr()).skipped() == 1);

  SECTION("a truncated zip has no central directory") {
    truncate_to(zip, 1500);  // inside the data of a.txt
    CHECK_THAT(data_error_of(members({zip})),
               Catch::Matches("load_from_zip#[0-9]+: '" + zip +
                              "': the zip's central directory cannot be read: no end of central directory record "
                              "\\(the file is truncated or not a zip\\)"));
  }
  SECTION("a flipped byte in a member") {
    flip_byte(zip, 1000);  // inside the data of a.txt: its CRC32 no longer matches
    CHECK_THAT(data_error_of(members({zip})),
               Catch::Matches("load_from_zip#[0-9]+: '" + zip + "' member 'a.txt' byte offset 0: ZIP bad CRC: .*"));
  }
}

TEST_CASE("load_from_zip and load_from_tar restore at the saved member's header without reading what is before it",
          "[io]") {
  TempDir dir;
  for (const auto& [format, name] :
       std::vector<std::pair<std::string, std::string>>{{"zip", "set.zip"}, {"ustar", "set.tar"}}) {
    INFO(format);
    const std::string path = dir / name;
    dpipe::testing::write_archive(path, format, "none",
                                  {{"a", noise(4000, 3)}, {"b", "beta"}, {"c", "gamma"}, {"d", "delta"}});
    const auto make = [&] {
      const auto files = dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files();
      return format == "zip" ? files | dpipe::io::load_from_zip() : files | dpipe::io::load_from_tar();
    };
    const auto pipe = make();
    (void)dpipe::testing::take(pipe, 2);
    const auto blob = dpipe::graph::save_state(pipe);
    // Member a's bytes (the start of the file up to b's header) are wiped: a restore that read the
    // archive from its start would fail on them.
    {
      std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
      file << std::string(2000, '\0');
    }
    const auto restored = make();
    dpipe::graph::load_state(restored, blob);
    CHECK(dpipe::testing::collect(restored) == std::vector<PathBytes>{{path + "/c", "gamma"}, {path + "/d", "delta"}});
  }
}

TEST_CASE("load_from_tar reports a damaged member header and loses the rest of that shard only", "[io]") {
  TempDir dir;
  const std::string shard = dir / "shard-0.tar";
  const std::string good = dir / "shard-1.tar";
  // A WebDataset shard: every member is one 512-byte header and one 512-byte block of data.
  dpipe::testing::write_archive(
      shard, "ustar", "none",
      {{"000.jpg", "j0"}, {"000.cls", "0"}, {"001.jpg", "j1"}, {"001.cls", "1"}, {"002.jpg", "j2"}, {"002.cls", "2"}});
  dpipe::testing::write_archive(good, "ustar", "none", {{"100.jpg", "j100"}, {"100.cls", "100"}});
  flip_byte(shard, 2048 + 100, 16);  // the mode, uid and gid of 001.jpg's header: its checksum fails
  const auto members = [&](dpipe::OnError on_error) {
    return dpipe::iter::from(std::vector<std::string>{shard, good}) | dpipe::io::open_files() |
           dpipe::io::load_from_tar({.on_error = on_error});
  };
  // libarchive asks to be called again and skips to the next header it can read: 001.jpg vanished.
  CHECK_THAT(data_error_of(members({})),
             Catch::Matches("load_from_tar#[0-9]+: '" + shard + "' byte offset 2048: Damaged tar archive"));
  const auto skipping = members(dpipe::OnError::skip());
  const auto samples = skipping | dpipe::io::webdataset();
  std::vector<std::string> keys;
  for (const auto& sample : dpipe::testing::collect(samples)) {
    keys.push_back(fs::path(sample.key).filename().string());
    for (const auto& [suffix, bytes] : sample.fields) keys.back() += suffix;
  }
  CHECK(keys == std::vector<std::string>{"000.jpg.cls", "100.jpg.cls"});
  CHECK(dynamic_cast<const dpipe::io::ArchiveLoader&>(*skipping.ptr()).skipped() == 1);
}

TEST_CASE("archive errors give the header offset where libarchive knows it and omit it where it does not", "[io]") {
  TempDir dir;
  const std::string cut = dir / "cut.tar";
  dpipe::testing::write_archive(cut, "ustar", "none", {{"one", "1"}, {"two", "2"}, {"three", "3"}});
  truncate_to(cut, 2048 + 100);  // inside the header of "three": libarchive's reader stops there for good
  const auto message = data_error_of(dpipe::iter::from(std::vector<std::string>{cut}) | dpipe::io::open_files() |
                                     dpipe::io::load_from_tar());
  CHECK_THAT(message, Catch::Matches("load_from_tar#[0-9]+: '" + cut + "': Truncated tar archive"));
  CHECK(message.find("18446744073709551") == std::string::npos);  // ARCHIVE_FATAL as an unsigned offset
}

TEST_CASE("load_from_zip gives UTF-8 member names in a program that never called setlocale", "[io]") {
  REQUIRE(std::string(std::setlocale(LC_ALL, nullptr)) == "C");
  TempDir dir;
  const std::string name = "unicod\xc3\xa9/\xe5\x90\x8d\xe5\x89\x8d.txt";  // unicodé/名前.txt
  const std::string zip = dir.write("names.zip", dpipe::testing::stored_zip({{name, "hello"}, {"plain.txt", "p"}}));
  const auto members = [](const std::string& path) {
    return dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files() | dpipe::io::load_from_zip();
  };
  CHECK(dpipe::testing::collect(members(zip)) ==
        std::vector<PathBytes>{{zip + "/" + name, "hello"}, {zip + "/plain.txt", "p"}});
  CHECK(::uselocale(locale_t{}) == LC_GLOBAL_LOCALE);  // the thread's locale is the program's again

  SECTION("a name that cannot be read or is empty is a DataError") {
    const std::string bad = dir.write("bad.zip", dpipe::testing::stored_zip({{"a.txt", "a"}, {"b\xff.txt", "b"}}));
    CHECK_THAT(data_error_of(members(bad)),
               Catch::Matches("load_from_zip#[0-9]+: '" + bad +
                              "' byte offset 36: the member's name cannot be read: Pathname cannot be converted "
                              "from UTF-8 to current locale."));
    const std::string empty = dir.write("empty.zip", dpipe::testing::stored_zip({{"", "nameless"}}));
    CHECK_THAT(data_error_of(members(empty)),
               Catch::Matches("load_from_zip#[0-9]+: '" + empty + "' byte offset 0: the member has no name"));
  }
}

TEST_CASE("load_from_zip checks each local header of a local zip against its central directory", "[io]") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> entries{{"00018.txt", "text 18"},
                                                                 {"00018.cls", "18"},
                                                                 {"00020.txt", "text 20"},
                                                                 {"00021.txt", "t21"},
                                                                 {"00022.txt", "22"}};
  const std::string bytes = dpipe::testing::stored_zip(entries);
  const auto members = [](std::vector<std::string> paths, dpipe::OnError on_error = {}) {
    return dpipe::iter::from(std::move(paths)) | dpipe::io::open_files() |
           dpipe::io::load_from_zip({.on_error = on_error});
  };
  const std::string good = dir.write("good.zip", bytes);
  CHECK(dpipe::testing::collect(members({good})).size() == entries.size());
  // A mutant: `name`'s local header (the first place its name is written) changed by `change`.
  const auto mutant = [&](const std::string& file, const std::string& name, const auto& change) {
    std::string changed = bytes;
    const auto header = changed.find(name) - 30;
    change(changed, header);
    return std::pair{dir.write(file, changed), header};
  };
  const auto rename = [](const std::string& to) {
    return [to](std::string& zip, std::size_t header) { zip.replace(header + 30, to.size(), to); };
  };

  const auto [renamed, renamed_at] = mutant("renamed.zip", "00018.cls", rename("00018.sls"));
  CHECK_THAT(data_error_of(members({renamed})),
             Catch::Matches("load_from_zip#[0-9]+: '" + renamed + "' member '00018.cls' byte offset " +
                            std::to_string(renamed_at) + ": its local header names it '00018.sls'"));
  const auto [duplicate, duplicate_at] = mutant("duplicate.zip", "00022.txt", rename("00020.txt"));
  CHECK_THAT(data_error_of(members({duplicate})),
             Catch::Matches("load_from_zip#[0-9]+: '" + duplicate + "' member '00022.txt' byte offset " +
                            std::to_string(duplicate_at) + ": its local header names it '00020.txt'"));
  const auto [resized, resized_at] =
      mutant("resized.zip", "00021.txt", [](std::string& zip, std::size_t header) { zip[header + 22] = '\4'; });
  CHECK_THAT(data_error_of(members({resized})),
             Catch::Matches("load_from_zip#[0-9]+: '" + resized + "' member '00021.txt' byte offset " +
                            std::to_string(resized_at) + ": its local header gives 4 bytes, the central directory 3"));
  // libarchive's streaming reader looks for the next local header's signature past a broken one.
  const auto [unsigned_header, unsigned_at] =
      mutant("unsigned.zip", "00020.txt", [](std::string& zip, std::size_t header) { zip[header + 2] = 'X'; });
  CHECK_THAT(
      data_error_of(members({unsigned_header})),
      Catch::Matches("load_from_zip#[0-9]+: '" + unsigned_header + "' member '00020.txt' byte offset " +
                     std::to_string(unsigned_at) + ": no local header where the central directory puts this member"));
  const std::string cut = dir.write("cut.zip", bytes.substr(0, bytes.size() - 10));
  CHECK_THAT(data_error_of(members({cut})),
             Catch::Matches("load_from_zip#[0-9]+: '" + cut +
                            "': the zip's central directory cannot be read: no end of central directory record "
                            "\\(the file is truncated or not a zip\\)"));

  SECTION("with OnError::skip a mismatch loses the rest of its zip") {
    const auto skipping = members({renamed, good}, dpipe::OnError::skip());
    std::vector<std::string> names;
    for (auto& [path, member] : dpipe::testing::collect(skipping)) names.push_back(fs::path(path).filename().string());
    CHECK(names ==
          std::vector<std::string>{"00018.txt", "00018.txt", "00018.cls", "00020.txt", "00021.txt", "00022.txt"});
    CHECK(dynamic_cast<const dpipe::io::ArchiveLoader&>(*skipping.ptr()).skipped() == 1);
  }
}

TEST_CASE("load_from_zip reads zip64 zips with their central directory checked", "[io]") {
  TempDir dir;
  const std::string ours = dir.write("ours.zip", dpipe::testing::stored_zip({{"a", "alpha"}, {"b", "beta"}}, true));
  const std::string libarchives = dir / "libarchives.zip";  // a zip64 end record; sizes after the data
  dpipe::testing::write_archive(libarchives, "zip", "none", {{"c", noise(3000, 4)}, {"d", "delta"}}, "zip:zip64");
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(std::vector<std::string>{ours, libarchives}) | dpipe::io::open_files() |
               dpipe::io::load_from_zip();
      },
      std::vector<PathBytes>{{ours + "/a", "alpha"},
                             {ours + "/b", "beta"},
                             {libarchives + "/c", noise(3000, 4)},
                             {libarchives + "/d", "delta"}},
      std::nullopt);
  std::string renamed = dpipe::testing::stored_zip({{"a", "alpha"}, {"b", "beta"}}, true);
  const auto b_header = renamed.find("PK\3\4", 1);
  renamed[b_header + 30] = 'x';
  const std::string mutant = dir.write("renamed.zip", renamed);
  CHECK_THAT(data_error_of(dpipe::iter::from(std::vector<std::string>{mutant}) | dpipe::io::open_files() |
                           dpipe::io::load_from_zip()),
             Catch::Matches("load_from_zip#[0-9]+: '" + mutant + "' member 'b' byte offset " +
                            std::to_string(b_header) + ": its local header names it 'x'"));
}

TEST_CASE("Worker processes and threads read sharded archives and compressed files and restore mid-epoch",
          "[io][concurrency]") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> compressors{
      {"gzip", ".gz"}, {"bzip2", ".bz2"}, {"xz", ".xz"}, {"zstd", ".zst"}};
  std::vector<std::string> lines;
  std::vector<PathBytes> members;
  std::vector<std::string> samples;  // "key:.cls=..,.txt=.."
  for (int shard = 0; shard < 6; ++shard) {
    std::string text;
    std::vector<dpipe::testing::ArchiveEntry> entries;
    for (int item = 0; item < 4; ++item) {
      const auto id = std::to_string(shard * 10 + item);
      lines.push_back("line " + id);
      text += lines.back() + "\n";
      entries.emplace_back(id + ".txt", "text " + id);
      entries.emplace_back(id + ".cls", id);
    }
    const auto& [filter, extension] = compressors[static_cast<std::size_t>(shard) % compressors.size()];
    dpipe::testing::write_compressed(dir / ("part-" + std::to_string(shard) + ".txt" + extension), filter, text);
    const std::string tar = dir / ("shard-" + std::to_string(shard) + ".tar" + (shard % 2 == 0 ? "" : ".gz"));
    dpipe::testing::write_archive(tar, "ustar", shard % 2 == 0 ? "none" : "gzip", entries);
    const std::string zip = dir / ("shard-" + std::to_string(shard) + ".zip");
    dpipe::testing::write_archive(zip, "zip", "none", entries);
    for (const auto& [member, bytes] : entries) members.push_back({member, bytes});
    for (int item = 0; item < 4; ++item) {
      const auto id = std::to_string(shard * 10 + item);
      samples.push_back(id + ":" + id + ",text " + id);
    }
  }
  const auto shards = [&](const std::string& pattern) {
    return dpipe::iter::from(std::vector<std::string>{dir / pattern}) | dpipe::io::shard_expand() |
           dpipe::iter::shuffle() | dpipe::iter::sharding_filter() | dpipe::io::open_files();
  };
  // Members are compared by their name in the archive and their bytes (the archive path varies).
  const auto member = [](const PathBytes& path_bytes) {
    return PathBytes{fs::path(path_bytes.first).filename().string(), path_bytes.second};
  };
  SECTION("decompress (gzip, bz2, xz, zstd) under readlines") {
    dpipe::testing::check_workers(
        [&] {
          return dpipe::io::list_files(dir.str(), {"part-*"}) | dpipe::iter::shuffle() |
                 dpipe::iter::sharding_filter() | dpipe::io::open_files() | dpipe::io::decompress() |
                 dpipe::io::readlines({}, dpipe::io::lines_only);
        },
        lines);
  }
  SECTION("load_from_tar over plain and gzip-compressed tars") {
    dpipe::testing::check_workers(
        [&] {
          return dpipe::io::list_files(dir.str(), {"shard-*.tar", "shard-*.tar.gz"}) | dpipe::iter::shuffle() |
                 dpipe::iter::sharding_filter() | dpipe::io::open_files() | dpipe::io::load_from_tar();
        },
        members, member);
  }
  SECTION("shard_expand and load_from_zip") {
    dpipe::testing::check_workers([&] { return shards("shard-{0..5}.zip") | dpipe::io::load_from_zip(); }, members,
                                  member);
  }
  SECTION("webdataset over zips") {
    dpipe::testing::check_workers(
        [&] { return shards("shard-{0..5}.zip") | dpipe::io::load_from_zip() | dpipe::io::webdataset(); }, samples,
        [](const dpipe::io::WebDatasetSample& sample) {
          return fs::path(sample.key).filename().string() + ":" + sample[".cls"] + "," + sample[".txt"];
        });
  }
}

// decompress holds decompressed bytes back until their integrity check passes: a damaged gzip
// member, bz2, xz or zstd stream yields no element before its DataError, and OnError::skip drops
// the damaged member while the intact members before it are kept; load_from_tar reads a bz2, xz,
// lzma or zstd tar through the same decompressor, so a damaged one yields no member. hold_back 0 shows what each
// test guards against (the bytes were passed on before the check), and a member longer than
// hold_back is passed on in pieces, its error saying how many of its bytes went on unchecked.

#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/archive_writer.hpp"
#include "support/battery.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using dpipe::testing::TempDir;

/// The lines one iteration yields before its DataError, and the error's message ("no DataError").
struct LinesThenError {
  std::vector<std::string> lines;
  std::string error = "no DataError";
};

LinesThenError read_lines(const std::vector<std::string>& paths, std::uint64_t hold_back = dpipe::io::kDefaultHoldBack,
                          dpipe::OnError on_error = {}) {
  const auto pipe = dpipe::iter::from(paths) | dpipe::io::open_files() |
                    dpipe::io::decompress({.hold_back = hold_back}) |
                    dpipe::io::readlines({.on_error = on_error}, dpipe::io::lines_only);
  LinesThenError result;
  try {
    for (auto& line : pipe) result.lines.push_back(std::move(line));
  } catch (const dpipe::DataError& error) {
    result.error = error.what();
  }
  return result;
}

/// Checks that reading `path` yields no line before the DataError "readlines#N: '<path>' byte
/// offset 0: <reason>" (`reason` a regex); returns what the same read yields with hold_back 0.
LinesThenError check_held_back(const std::string& path, const std::string& reason) {
  const auto held = read_lines({path});
  CHECK(held.lines.empty());
  CHECK_THAT(held.error, Catch::Matches("readlines#[0-9]+: '" + path + "' byte offset 0: " + reason));
  return read_lines({path}, 0);
}

/// Flips bit `bit` of the byte at `offset` of `path` (from its end when negative).
void flip_bit(const std::string& path, std::int64_t offset, int bit) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = offset < 0 ? static_cast<std::int64_t>(fs::file_size(path)) + offset : offset;
  file.seekg(at);
  const int byte = file.get();
  file.seekp(at);
  file.put(static_cast<char>(byte ^ (1 << bit)));
}

/// `count` lines of numbers, each followed by `padding` letters, the same for the same seed.
std::string numbered_lines(int count, std::uint32_t seed, std::size_t padding = 0) {
  std::minstd_rand random(seed);
  std::string text;
  for (int line = 0; line < count; ++line) {
    text += "record " + std::to_string(line) + " " + std::to_string(random()) + " ";
    for (std::size_t letter = 0; letter < padding; ++letter) text += static_cast<char>('a' + random() % 26);
    text += "\n";
  }
  return text;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < text.size();) {
    const auto end = text.find('\n', at);
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

/// XXH64 of `bytes` with seed 0 (the zstd frame checksum is its low 32 bits; RFC 8878 §3.1.1).
std::uint64_t xxh64(std::string_view bytes) {
  constexpr std::uint64_t kP1 = 11400714785074694791ULL, kP2 = 14029467366897019727ULL, kP3 = 1609587929392839161ULL,
                          kP4 = 9650029242287828579ULL, kP5 = 2870177450012600261ULL;
  const auto rotl = [](std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  const auto round = [&](std::uint64_t acc, std::uint64_t input) { return rotl(acc + input * kP2, 31) * kP1; };
  const auto load = [&](std::size_t at, std::size_t size) {
    std::uint64_t value = 0;
    std::memcpy(&value, bytes.data() + at, size);  // little-endian
    return value;
  };
  std::size_t at = 0;
  std::uint64_t hash = kP5;
  if (bytes.size() >= 32) {
    std::array<std::uint64_t, 4> lanes{kP1 + kP2, kP2, 0, 0 - kP1};
    for (; at + 32 <= bytes.size(); at += 32)
      for (std::size_t lane = 0; lane < 4; ++lane) lanes[lane] = round(lanes[lane], load(at + lane * 8, 8));
    hash = rotl(lanes[0], 1) + rotl(lanes[1], 7) + rotl(lanes[2], 12) + rotl(lanes[3], 18);
    for (const auto lane : lanes) hash = (hash ^ round(0, lane)) * kP1 + kP4;
  }
  hash += bytes.size();
  for (; at + 8 <= bytes.size(); at += 8) hash = rotl(hash ^ round(0, load(at, 8)), 27) * kP1 + kP4;
  if (at + 4 <= bytes.size()) {
    hash = rotl(hash ^ (load(at, 4) * kP1), 23) * kP2 + kP3;
    at += 4;
  }
  for (; at < bytes.size(); ++at) hash = rotl(hash ^ (load(at, 1) * kP5), 11) * kP1;
  hash = (hash ^ (hash >> 33)) * kP2;
  hash = (hash ^ (hash >> 29)) * kP3;
  return hash ^ (hash >> 32);
}

/// Writes `text` to `path` as one zstd frame of raw blocks with a content checksum, as the zstd
/// tool writes it (libarchive's writer leaves the checksum out).
void write_zstd_with_checksum(const std::string& path, const std::string& text) {
  std::string frame("\x28\xb5\x2f\xfd", 4);  // the magic number
  frame += '\x04';                           // descriptor: a content checksum, no content size
  frame += '\x58';                           // window: 2 MiB
  constexpr std::size_t kBlock = 100000;
  for (std::size_t at = 0; at < text.size(); at += kBlock) {
    const std::size_t size = std::min(kBlock, text.size() - at);
    const auto header = static_cast<std::uint32_t>(size << 3U) | (at + size == text.size() ? 1U : 0U);  // raw
    for (int byte = 0; byte < 3; ++byte) frame += static_cast<char>((header >> (8 * byte)) & 0xffU);
    frame += text.substr(at, size);
  }
  const auto checksum = static_cast<std::uint32_t>(xxh64(text));
  for (int byte = 0; byte < 4; ++byte) frame += static_cast<char>((checksum >> (8 * byte)) & 0xffU);
  std::ofstream(path, std::ios::binary) << frame;
}

/// The names of the members load_from_tar yields from `paths` (as `lines`) before its DataError.
LinesThenError read_members(const std::vector<std::string>& paths, dpipe::OnError on_error = {}) {
  const auto pipe =
      dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::load_from_tar({.on_error = on_error});
  LinesThenError result;
  try {
    for (auto& member : pipe) result.lines.push_back(fs::path(member.first).filename().string());
  } catch (const dpipe::DataError& error) {
    result.error = error.what();
  }
  return result;
}

/// Writes `entries` to `path` as a ustar compressed with `filter`; a zstd one as write_zstd_with_checksum
/// writes it, with its content checksum.
void write_tar(const std::string& path, const std::string& filter,
               const std::vector<dpipe::testing::ArchiveEntry>& entries) {
  if (filter != "zstd") return dpipe::testing::write_archive(path, "ustar", filter, entries);
  dpipe::testing::write_archive(path, "ustar", "none", entries);
  write_zstd_with_checksum(path, bytes_of(path));
}

}  // namespace

TEST_CASE("decompress yields no line of a bz2 stream whose block CRC fails", "[io]") {
  TempDir dir;
  const std::string path = dir / "set.txt.bz2";
  // 400 lines of 250 bytes: one bz2 block, more than libarchive decodes while it opens the file.
  dpipe::testing::write_compressed(path, "bzip2", numbered_lines(400, 1, 220));
  const auto middle = static_cast<std::int64_t>(fs::file_size(path) / 2);
  flip_bit(path, middle, 2);
  flip_bit(path, middle + 40, 5);
  // What hold_back guards against: the block's garbage comes out before its CRC is checked.
  const auto passed_on = check_held_back(path, "bzip decompression failed");
  CHECK(passed_on.lines.size() > 200);
  CHECK_THAT(passed_on.error, Catch::Matches("readlines#[0-9]+: '" + path +
                                             "' byte offset 65536: bzip decompression failed \\(65536 bytes of this "
                                             "stream from offset 0 were passed on unchecked: it is longer than "
                                             "hold_back, 0 bytes\\)"));
}

TEST_CASE("decompress yields no line of a 3 MB gzip member with two flipped bits", "[io]") {
  TempDir dir;
  const std::string path = dir / "set.txt.gz";
  dpipe::testing::write_compressed(path, "gzip", numbered_lines(400000, 2));
  REQUIRE(fs::file_size(path) > 3'000'000);
  const auto middle = static_cast<std::int64_t>(fs::file_size(path) / 2);
  flip_bit(path, middle, 3);
  flip_bit(path, middle + 1000, 6);
  const auto held = read_lines({path});
  CHECK(held.lines.empty());
  CHECK_THAT(held.error,
             Catch::Matches("readlines#[0-9]+: '" + path + "' byte offset 0: corrupt gzip stream: [a-z ]+"));
  CHECK(read_lines({path}, 0).lines.size() > 100000);

  SECTION("a member whose trailer's CRC32 does not match yields nothing") {
    const std::string crc = dir / "crc.txt.gz";
    dpipe::testing::write_compressed(crc, "gzip", numbered_lines(300000, 3));
    flip_bit(crc, -8, 0);  // every byte inflates as written
    CHECK(check_held_back(crc, "corrupt gzip stream: incorrect data check").lines.size() > 200000);
  }
}

TEST_CASE("decompress keeps the gzip members before a damaged one and skip drops that member", "[io]") {
  TempDir dir;
  const std::string a = dir / "a.gz";
  const std::string b = dir / "b.gz";
  const std::string c = dir / "c.gz";
  dpipe::testing::write_compressed(a, "gzip", "a1\na2\n");
  const std::string b_text = numbered_lines(20000, 7);
  dpipe::testing::write_compressed(b, "gzip", b_text);
  dpipe::testing::write_compressed(c, "gzip", "c1\n");
  flip_bit(b, -8, 0);  // member b's CRC32
  const std::string joined = dir.write("joined.gz", bytes_of(a) + bytes_of(b) + bytes_of(c));
  const std::string after = dir / "after.gz";
  dpipe::testing::write_compressed(after, "gzip", "z1\n");

  const auto raised = read_lines({joined, after});
  CHECK(raised.lines == std::vector<std::string>{"a1", "a2"});
  CHECK_THAT(raised.error, Catch::Matches("readlines#[0-9]+: '" + joined +
                                          "' byte offset 6: corrupt gzip stream: incorrect data check"));
  const auto skipped = read_lines({joined, after}, dpipe::io::kDefaultHoldBack, dpipe::OnError::skip());
  CHECK(skipped.lines == std::vector<std::string>{"a1", "a2", "z1"});
  CHECK(skipped.error == "no DataError");
  // Without the hold-back the damaged member's lines stayed in the epoch.
  CHECK(read_lines({joined, after}, 0, dpipe::OnError::skip()).lines.size() > 10000);
}

TEST_CASE("decompress yields no line of a zstd frame whose checksum fails", "[io]") {
  TempDir dir;
  const std::string text = numbered_lines(20000, 4);
  const std::string good = dir / "good.zst";
  write_zstd_with_checksum(good, text);
  CHECK(read_lines({good}).lines == split_lines(text));

  const std::string path = dir / "flipped.zst";
  write_zstd_with_checksum(path, text);
  flip_bit(path, static_cast<std::int64_t>(fs::file_size(path)) / 2, 1);  // inside a raw block: it decodes
  CHECK(check_held_back(path, "Zstd decompression failed: Restored data doesn't match checksum").lines.size() > 10000);

  SECTION("under skip the stream's lines are dropped and the next file is read") {
    const auto skipped = read_lines({path, good}, dpipe::io::kDefaultHoldBack, dpipe::OnError::skip());
    CHECK(skipped.lines == split_lines(text));
  }
}

TEST_CASE("decompress yields no line of an xz stream with two flipped bits", "[io]") {
  TempDir dir;
  const std::string path = dir / "set.txt.xz";
  dpipe::testing::write_compressed(path, "xz", numbered_lines(50000, 5));
  const auto middle = static_cast<std::int64_t>(fs::file_size(path) / 2);
  flip_bit(path, middle, 4);
  flip_bit(path, middle + 100, 0);
  CHECK(check_held_back(path, "Lzma library error: Corrupted input data").lines.size() > 10000);
}

TEST_CASE("a gzip member longer than hold_back is passed on and its error counts the bytes unchecked", "[io]") {
  TempDir dir;
  const std::string path = dir / "long.txt.gz";
  const std::string text = numbered_lines(100000, 6);
  dpipe::testing::write_compressed(path, "gzip", text);
  flip_bit(path, -8, 0);
  constexpr std::uint64_t kHoldBack = 64 << 10;
  const auto result = read_lines({path}, kHoldBack);
  // The bytes passed on are those before the error's offset: all of them came from the member
  // whose check then failed.
  std::smatch match;
  REQUIRE(std::regex_match(result.error, match,
                           std::regex("readlines#[0-9]+: '" + path +
                                      "' byte offset ([0-9]+): corrupt gzip stream: incorrect data check \\(([0-9]+) "
                                      "bytes of this member from offset 0 were passed on unchecked: it is longer than "
                                      "hold_back, 65536 bytes\\)")));
  CHECK(match[1] == match[2]);
  const auto passed_on = std::stoull(match[1]);
  CHECK(passed_on + kHoldBack > text.size() - (256 << 10));
  CHECK(result.lines == split_lines(text.substr(0, text.rfind('\n', passed_on - 1) + 1)));
}

TEST_CASE("load_from_tar yields no member of a bz2 xz or zstd tar with two flipped bits and skip drops that tar",
          "[io]") {
  TempDir dir;
  // Eight members of 150 KB: two bz2 blocks, the flipped bits in the second one.
  std::vector<dpipe::testing::ArchiveEntry> entries;
  for (std::uint32_t member = 0; member < 8; ++member)
    entries.emplace_back("m" + std::to_string(member), numbered_lines(2000, 10 + member, 50));
  for (const auto& [filter, reason] : std::vector<std::pair<std::string, std::string>>{
           {"bzip2", "bzip decompression failed"},
           {"xz", "Lzma library error: Corrupted input data"},
           {"zstd", "Zstd decompression failed: Restored data doesn't match checksum"}}) {
    INFO(filter);
    const std::string path = dir / ("set.tar." + filter);
    const std::string next = dir / ("next.tar." + filter);
    write_tar(path, filter, entries);
    write_tar(next, filter, {{"n0", "zero"}, {"n1", "one"}});
    const auto at = static_cast<std::int64_t>(fs::file_size(path) * 3 / 4);
    flip_bit(path, at, 2);
    flip_bit(path, at + 40, 5);
    const auto raised = read_members({path, next});
    CHECK(raised.lines.empty());
    CHECK_THAT(raised.error, Catch::Matches("load_from_tar#[0-9]+: '" + path + "': " + reason));
    const auto skipped = read_members({path, next}, dpipe::OnError::skip());
    CHECK(skipped.lines == std::vector<std::string>{"n0", "n1"});
    CHECK(skipped.error == "no DataError");
  }
}

TEST_CASE("load_from_tar reads bz2 xz lzma and zstd tars and restores at their members", "[io]") {
  TempDir dir;
  std::vector<std::string> paths;
  std::vector<dpipe::io::PathBytes> expected;
  for (const std::string filter : {"bzip2", "xz", "lzma", "zstd"}) {
    paths.push_back(dir / ("set.tar." + filter));
    const std::vector<dpipe::testing::ArchiveEntry> entries{
        {filter + "/a", "alpha " + filter}, {filter + "/b", numbered_lines(3000, 20, 30)}, {"c", filter}};
    write_tar(paths.back(), filter, entries);
    for (const auto& [name, bytes] : entries) expected.push_back({paths.back() + "/" + name, bytes});
  }
  dpipe::testing::check_battery(
      [&] { return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::load_from_tar(); }, expected,
      std::nullopt);
}

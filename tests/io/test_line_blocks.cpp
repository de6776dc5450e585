// readlines in blocks (io::in_blocks) and the LineBlock it yields: blocks of consecutive lines of
// one file with the per-line reader's rules, the standard battery over blocks that cross the
// reader's buffer, bad lines raised or skipped, worker processes and threads, and LineBlock's own
// contract (runs copied once, equality by lines, bytes that cross processes).

#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/battery.hpp"
#include "support/io_workers.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"
#include "support/temp_dir.hpp"

namespace Catch {
template <>
struct StringMaker<dpipe::io::LineBlock> {
  static std::string convert(const dpipe::io::LineBlock& block) {
    std::ostringstream text;
    text << "{'" << block.path() << "' from line " << block.first_line() << ":";
    for (const std::string_view line : block) text << " \"" << line << "\"";
    text << "}";
    return text.str();
  }
};
}  // namespace Catch

namespace {

namespace fs = std::filesystem;
using dpipe::io::LineBlock;
using dpipe::testing::TempDir;

/// The block of `lines` from line `first_line` of `path`, made line by line.
LineBlock block_of(const std::string& path, std::uint64_t first_line, const std::vector<std::string>& lines) {
  LineBlock block(path, first_line);
  for (const auto& line : lines) block.append(line);
  return block;
}

/// Each block's lines, one after the other.
std::vector<std::string> lines_in(const std::vector<LineBlock>& blocks) {
  std::vector<std::string> lines;
  for (const auto& block : blocks)
    for (const std::string_view line : block) lines.emplace_back(line);
  return lines;
}

}  // namespace

TEST_CASE("LineBlock: lines by index and a run copied at once compare by their lines", "[io]") {
  const std::string buffer = "ab\ncd\r\n\nlast";
  const std::vector<std::string_view> run{std::string_view(buffer).substr(0, 2), std::string_view(buffer).substr(3, 2),
                                          std::string_view(buffer).substr(7, 0), std::string_view(buffer).substr(8, 4)};
  LineBlock block("f.txt", 7);
  block.append_run(run);
  block.append("more");
  CHECK(block.size() == 5);
  CHECK(block.path() == "f.txt");
  CHECK(block.first_line() == 7);
  CHECK(block[1] == "cd");
  CHECK(block.at(3) == "last");
  CHECK(block.strings() == std::vector<std::string>{"ab", "cd", "", "last", "more"});
  CHECK(block.buffer() == "ab\ncd\r\n\nlast\nmore\n");                     // no two lines run together
  CHECK(block == block_of("f.txt", 7, {"ab", "cd", "", "last", "more"}));  // the separators do not count
  CHECK_FALSE(block == block_of("f.txt", 8, {"ab", "cd", "", "last", "more"}));
  CHECK_FALSE(block == block_of("g.txt", 7, {"ab", "cd", "", "last", "more"}));
  CHECK_FALSE(block == block_of("f.txt", 7, {"ab", "cd", "", "last"}));
  CHECK_THROWS_MATCHES(block.at(5), std::out_of_range, Catch::Message("LineBlock::at: line 5 of a block of 5"));
  CHECK_THROWS_MATCHES(LineBlock("f.txt", 1, "abc", {{0, 2}, {2, 4}}), dpipe::InvalidArgument,
                       Catch::Message("LineBlock: line 1 spans bytes [2, 4) of a buffer of 3"));
  CHECK_THROWS_MATCHES(LineBlock("f.txt", 1, "abc", {{2, 1}}), dpipe::InvalidArgument,
                       Catch::Message("LineBlock: line 0 spans bytes [2, 1) of a buffer of 3"));
}

TEST_CASE("LineBlock: blocks cross as bytes and corrupt bytes are refused", "[io]") {
  static_assert(dpipe::serializable<LineBlock>);
  const LineBlock block("dir/f.txt", 3, "one\ntwo\n", {{0, 3}, {4, 7}});
  const auto bytes = dpipe::to_bytes(block);
  const auto decoded = dpipe::from_bytes<LineBlock>(bytes);
  CHECK(decoded == block);
  CHECK(decoded.buffer() == block.buffer());
  CHECK(dpipe::from_bytes<LineBlock>(dpipe::to_bytes(LineBlock())) == LineBlock());

  auto bad_span = bytes;  // the last eight bytes are the last span's end: 7, little-endian
  bad_span[bad_span.size() - 8] = std::byte{9};
  CHECK_THROWS_MATCHES(dpipe::from_bytes<LineBlock>(bad_span), dpipe::SerializationError,
                       Catch::Message("corrupt input: a LineBlock whose line 1 spans bytes [4, 9) of a buffer of 8"));
  const std::vector<std::byte> cut(bytes.begin(), bytes.end() - 1);
  CHECK_THROWS_AS(dpipe::from_bytes<LineBlock>(cut), dpipe::SerializationError);
}

namespace {

/// `files` read by readlines(options) in blocks of `lines`.
dpipe::IterPipe<LineBlock> blocks_of(const dpipe::testing::TextFiles& files, dpipe::io::ReadLinesOptions options,
                                     std::size_t lines) {
  return dpipe::iter::from(std::vector<std::string>{files.a, files.b, files.c}) | dpipe::io::open_files() |
         dpipe::io::readlines(options, dpipe::io::in_blocks(lines));
}

}  // namespace

TEST_CASE("readlines in_blocks yields blocks of consecutive lines of one file", "[io]") {
  const dpipe::testing::TextFiles files;
  CHECK(dpipe::testing::collect(blocks_of(files, {}, 2)) ==
        std::vector<LineBlock>{block_of(files.a, 1, {"header", "one"}), block_of(files.a, 3, {"two", ""}),
                               block_of(files.a, 5, {"three"}), block_of(files.b, 1, {"header", "four"}),
                               block_of(files.b, 3, {"five"})});
  CHECK(dpipe::testing::collect(blocks_of(files, {.skip_lines = 1, .strip_newline = false}, 4)) ==
        std::vector<LineBlock>{block_of(files.a, 2, {"one\n", "two\n", "\n", "three\n"}),
                               block_of(files.b, 2, {"four\n", "five"})});
  CHECK(dpipe::testing::collect(blocks_of(files, {.skip_lines = 5}, 3)) == std::vector<LineBlock>{});
  for (const dpipe::io::ReadLinesOptions options :
       {dpipe::io::ReadLinesOptions{}, dpipe::io::ReadLinesOptions{.skip_lines = 1, .strip_newline = false},
        dpipe::io::ReadLinesOptions{.skip_lines = 2}})
    for (const std::size_t lines : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{1000}}) {
      INFO("skip_lines " << options.skip_lines << ", strip_newline " << options.strip_newline << ", blocks of "
                         << lines);
      CHECK(lines_in(dpipe::testing::collect(blocks_of(files, options, lines))) ==
            dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{files.a, files.b, files.c}) |
                                    dpipe::io::open_files() | dpipe::io::readlines(options, dpipe::io::lines_only)));
    }
  CHECK_THROWS_WITH(blocks_of(files, {}, 0), "readlines: in_blocks needs at least 1 line per block");
  CHECK_THROWS_WITH(blocks_of(files, {.max_line_bytes = 0}, 4), "readlines: max_line_bytes must be > 0");
}

TEST_CASE("readlines in_blocks runs the standard battery over blocks that cross its read buffer", "[io]") {
  TempDir dir;
  std::vector<std::string> paths;
  std::vector<LineBlock> expected;
  for (int file = 0; file < 3; ++file) {
    // 3000 lines of 1 to 97 bytes (about 150 KiB: the blocks of 1000 lines cross the reader's
    // 64 KiB buffer), then lines of up to 100 KiB, longer than the buffer.
    std::vector<std::string> lines;
    for (int line = 0; line < 3000; ++line)
      lines.push_back(std::to_string(file) + ":" +
                      std::string(static_cast<std::size_t>(line * 7 % 96), static_cast<char>('a' + line % 26)));
    for (int line = 0; line < 3; ++line)
      lines.push_back(std::to_string(file) + ":" + std::string(static_cast<std::size_t>(line) * 50000, 'x'));
    std::string text;
    for (const auto& line : lines) text += line + (file == 1 ? "\r\n" : "\n");
    paths.push_back(dir.write("f" + std::to_string(file) + ".txt", text));
    for (std::size_t first = 0; first < lines.size(); first += 1000)
      expected.push_back(block_of(
          paths.back(), first + 1,
          std::vector<std::string>(lines.begin() + static_cast<std::ptrdiff_t>(first),
                                   lines.begin() + static_cast<std::ptrdiff_t>(std::min(first + 1000, lines.size())))));
  }
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(paths) | dpipe::io::open_files() |
               dpipe::io::readlines({}, dpipe::io::in_blocks(1000));
      },
      expected, std::nullopt);
}

TEST_CASE("readlines in_blocks restores inside a file without reading the files before it", "[io]") {
  const dpipe::testing::TextFiles files;
  const auto pipe = blocks_of(files, {}, 2);
  (void)dpipe::testing::take(pipe, 4);  // a.txt's three blocks and the first of b.txt
  const auto blob = dpipe::graph::save_state(pipe);
  fs::remove(files.a);  // nothing reads it again
  const auto restored = blocks_of(files, {}, 2);
  dpipe::graph::load_state(restored, blob);
  CHECK(dpipe::testing::collect(restored) == std::vector<LineBlock>{block_of(files.b, 3, {"five"})});
}

TEST_CASE("readlines in_blocks raises a bad line's DataError or skips it and ends its block there", "[io]") {
  TempDir dir;
  const std::string good = dir.write("good.txt", "1\n2\n");
  const std::string long_lines =
      dir.write("long.txt", "ok\n" + std::string(40, 'y') + "\nafter\n" + std::string(50, 'z'));
  const auto make = [&](dpipe::OnError on_error) {
    return dpipe::iter::from(std::vector<std::string>{long_lines, good}) | dpipe::io::open_files() |
           dpipe::io::readlines({.max_line_bytes = 32, .on_error = on_error}, dpipe::io::in_blocks(10));
  };
  SECTION("raise") {
    try {
      (void)dpipe::testing::collect(make({}));
      FAIL("no DataError");
    } catch (const dpipe::DataError& error) {
      CHECK_THAT(error.what(),
                 Catch::Matches("readlines#[0-9]+: '" + long_lines +
                                "' line 2 byte offset 3: the line is longer than max_line_bytes \\(32\\)"));
    }
  }
  SECTION("skip: only the bad lines are lost, logged and counted") {
    dpipe::testing::LogCapture log;
    const auto pipe = make(dpipe::OnError::skip());
    dpipe::graph::enable_statistics(pipe.ptr());
    CHECK(dpipe::testing::collect(pipe) == std::vector<LineBlock>{block_of(long_lines, 1, {"ok"}),
                                                                  block_of(long_lines, 3, {"after"}),
                                                                  block_of(good, 1, {"1", "2"})});
    const auto rows = dpipe::graph::statistics(pipe.ptr());
    REQUIRE_FALSE(rows.empty());
    CHECK(rows[0].label.starts_with("readlines#"));
    CHECK(rows[0].skipped == 2);
    const auto messages = log.messages();
    REQUIRE(messages.size() == 2);
    CHECK_THAT(messages[0], Catch::Matches("readlines#[0-9]+: '" + long_lines +
                                           "' line 2 byte offset 3: the line is longer than max_line_bytes \\(32\\); "
                                           "skipped \\(1 in this epoch\\)"));
    CHECK_THAT(messages[1], Catch::Matches("readlines#[0-9]+: '" + long_lines +
                                           "' line 4 byte offset 50: the line is longer than max_line_bytes \\(32\\); "
                                           "skipped \\(2 in this epoch\\)"));
  }
}

TEST_CASE("Worker processes and threads read sharded files in line blocks and restore mid-epoch", "[io][concurrency]") {
  TempDir dir;
  std::vector<std::string> expected;  // each block as "file:first line:lines"
  for (std::size_t file = 0; file < 8; ++file) {
    std::string text;
    for (std::size_t line = 0; line < 5; ++line) text += std::to_string(file * 10 + line) + "\n";
    const std::string path = dir.write("part-" + std::to_string(file) + ".txt", text);
    for (std::size_t first = 0; first < 5; first += 2) {
      std::string block = path + ":" + std::to_string(first + 1) + ":";
      for (std::size_t line = first; line < std::min<std::size_t>(first + 2, 5); ++line)
        block += std::to_string(file * 10 + line) + ",";
      expected.push_back(block);
    }
  }
  dpipe::testing::check_workers(
      [&] {
        return dpipe::io::list_files(dir.str(), {"*.txt"}) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() |
               dpipe::io::open_files() | dpipe::io::readlines({}, dpipe::io::in_blocks(2));
      },
      expected,
      [](const LineBlock& block) {
        std::string text = block.path() + ":" + std::to_string(block.first_line()) + ":";
        for (const std::string_view line : block) (text += line) += ",";
        return text;
      });
}

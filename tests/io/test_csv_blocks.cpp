// parse_csv in blocks (io::in_blocks) and the CsvBlock it yields: blocks of rows of one file with
// parse_csv's dialect, the standard battery over rows longer than the read block, bad rows
// raised or skipped, checkpoints after multi-line rows, worker processes and threads, and
// CsvBlock's own contract (rows and fields by index, equality by fields, bytes that cross
// processes).

#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/battery.hpp"
#include "support/data_error.hpp"
#include "support/io_workers.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"
#include "support/temp_dir.hpp"

namespace Catch {
template <>
struct StringMaker<dpipe::io::CsvBlock> {
  static std::string convert(const dpipe::io::CsvBlock& block) {
    std::ostringstream text;
    text << "{'" << block.path() << "' from line " << block.first_line() << ":";
    for (const auto row : block) {
      text << " [";
      for (const std::string_view field : row) text << "\"" << field << "\"";
      text << "]";
    }
    text << "}";
    return text.str();
  }
};
}  // namespace Catch

namespace {

namespace fs = std::filesystem;
using dpipe::io::CsvBlock;
using dpipe::io::CsvRow;
using dpipe::testing::TempDir;
using Rows = std::vector<CsvRow>;

/// The block of `rows` of `path`, whose first row starts on line `first_line`.
CsvBlock block_of(const std::string& path, std::uint64_t first_line, const Rows& rows) {
  CsvBlock block(path, first_line);
  for (const auto& row : rows) block.append(row);
  return block;
}

/// Each block's rows, one after the other.
Rows rows_in(const std::vector<CsvBlock>& blocks) {
  Rows rows;
  for (const auto& block : blocks)
    for (const auto row : block) rows.push_back(row.strings());
  return rows;
}

/// `paths` parsed with `options`, in blocks of `rows` when it is not 0, else row by row.
dpipe::IterPipe<CsvBlock> blocks_of(const std::vector<std::string>& paths, dpipe::io::CsvOptions options,
                                    std::size_t rows) {
  return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::parse_csv(options, dpipe::io::in_blocks(rows));
}

}  // namespace

TEST_CASE("CsvBlock: rows and fields by index compare by their fields", "[io][csv]") {
  CsvBlock block("f.csv", 3);
  block.append({"a", "b,c"});
  block.append({});
  block.append(std::vector<std::string>{"", "x\ny", ""});
  REQUIRE(block.size() == 3);
  CHECK(block.path() == "f.csv");
  CHECK(block.first_line() == 3);
  CHECK(block[0].size() == 2);
  CHECK(block[0][1] == "b,c");
  CHECK(block[1].empty());
  CHECK(block.at(2).strings() == CsvRow{"", "x\ny", ""});
  CHECK(block.buffer() == "ab,cx\ny");
  CHECK(block.field_ends() == std::vector<std::uint64_t>{1, 4, 4, 7, 7});
  CHECK(block.row_ends() == std::vector<std::uint64_t>{2, 2, 5});
  CHECK(block == block_of("f.csv", 3, {{"a", "b,c"}, {}, {"", "x\ny", ""}}));
  CHECK_FALSE(block == block_of("f.csv", 3, {{"a", "b,c"}, {""}, {"", "x\ny", ""}}));  // an empty field is a field
  CHECK_FALSE(block == block_of("f.csv", 3, {{"ab", ",c"}, {}, {"", "x\ny", ""}}));
  CHECK_FALSE(block == block_of("f.csv", 4, {{"a", "b,c"}, {}, {"", "x\ny", ""}}));
  CHECK_THROWS_MATCHES(block.at(3), std::out_of_range, Catch::Message("CsvBlock::at: row 3 of a block of 3"));
  CHECK_THROWS_MATCHES(block[0].at(2), std::out_of_range, Catch::Message("CsvBlock::Row::at: field 2 of a row of 2"));
  CHECK_THROWS_MATCHES(CsvBlock("f.csv", 1, "abc", {2, 1, 3}, {3}), dpipe::InvalidArgument,
                       Catch::Message("CsvBlock: field 1 ends at 1, before the field ahead of it (2)"));
  CHECK_THROWS_MATCHES(CsvBlock("f.csv", 1, "abc", {2}, {1}), dpipe::InvalidArgument,
                       Catch::Message("CsvBlock: the fields end at 2 but the buffer at 3"));
  CHECK_THROWS_MATCHES(CsvBlock("f.csv", 1, "abc", {3}, {0, 2}), dpipe::InvalidArgument,
                       Catch::Message("CsvBlock: the rows end at 2 but the fields at 1"));
}

TEST_CASE("CsvBlock: blocks cross as bytes and corrupt bytes are refused", "[io][csv]") {
  static_assert(dpipe::serializable<CsvBlock>);
  const auto block = block_of("dir/f.csv", 2, {{"one", "two"}, {}, {"three"}});
  const auto bytes = dpipe::to_bytes(block);
  const auto decoded = dpipe::from_bytes<CsvBlock>(bytes);
  CHECK(decoded == block);
  CHECK(decoded.buffer() == block.buffer());
  CHECK(dpipe::from_bytes<CsvBlock>(dpipe::to_bytes(CsvBlock())) == CsvBlock());

  auto bad_row = bytes;  // the last eight bytes are the last row's end: 3 fields, little-endian
  bad_row[bad_row.size() - 8] = std::byte{4};
  CHECK_THROWS_MATCHES(dpipe::from_bytes<CsvBlock>(bad_row), dpipe::SerializationError,
                       Catch::Message("corrupt input: a CsvBlock whose the rows end at 4 but the fields at 3"));
  const std::vector<std::byte> cut(bytes.begin(), bytes.end() - 1);
  CHECK_THROWS_AS(dpipe::from_bytes<CsvBlock>(cut), dpipe::SerializationError);
}

TEST_CASE("parse_csv in_blocks yields parse_csv's rows in blocks of one file", "[io][csv]") {
  TempDir dir;
  const auto quoted = dir.write("quoted.csv",
                                "a,\"b,c\",d\n"                        // line 1
                                "\"say \"\"hi\"\"\",,\n"               // line 2
                                "\"two\nlines\",\"crlf\r\ninside\"\n"  // lines 3-5
                                "\n"                                   // line 6
                                "x\"y,\"ab\"c,\"\"\n"                  // line 7
                                ",\n"                                  // line 8
                                "last,row");                           // line 9
  const auto crlf = dir.write("crlf.csv", "one,two\r\n\"3\r\n4\",five\r\n\r\nsix\r\n");
  const auto cr = dir.write("cr.csv", "a\rb,\"c\rd\"\r");
  const auto empty = dir.write("empty.csv", "");
  CHECK(dpipe::testing::collect(blocks_of({quoted, empty, cr}, {}, 3)) ==
        std::vector<CsvBlock>{
            block_of(quoted, 1, {{"a", "b,c", "d"}, {"say \"hi\"", "", ""}, {"two\nlines", "crlf\r\ninside"}}),
            block_of(quoted, 6, {{}, {"x\"y", "abc", ""}, {"", ""}}), block_of(quoted, 9, {{"last", "row"}}),
            block_of(cr, 1, {{"a"}, {"b", "c\rd"}})});
  const std::vector<std::string> all{quoted, crlf, cr, empty};
  for (const dpipe::io::CsvOptions options :
       {dpipe::io::CsvOptions{}, dpipe::io::CsvOptions{.skip_lines = 2}, dpipe::io::CsvOptions{.delimiter = ';'}})
    for (const std::size_t rows : {std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{1000}}) {
      INFO("skip_lines " << options.skip_lines << ", delimiter " << options.delimiter << ", blocks of " << rows);
      CHECK(rows_in(dpipe::testing::collect(blocks_of(all, options, rows))) ==
            dpipe::testing::collect(dpipe::iter::from(all) | dpipe::io::open_files() | dpipe::io::parse_csv(options)));
    }
  CHECK_THROWS_WITH(blocks_of(all, {}, 0), "parse_csv: in_blocks needs at least 1 row per block");
  CHECK_THROWS_WITH(blocks_of(all, {.delimiter = '"'}, 4), "parse_csv: the delimiter and the quotechar must differ");
}

TEST_CASE("parse_csv in_blocks runs the standard battery over rows longer than its read block", "[io][csv]") {
  TempDir dir;
  std::vector<CsvBlock> expected;
  std::vector<std::string> paths;
  for (int file = 0; file < 3; ++file) {
    std::string text;
    Rows rows;
    for (int row = 0; row < 4; ++row) {
      // Quoted fields of up to 100 KiB with line ends and quotes in them: they span read blocks.
      const std::string body = std::string(static_cast<std::size_t>(row) * 33000, 'x');
      rows.push_back({std::to_string(file), body + "\n\"" + body, ""});
      text += std::to_string(file) + ",\"" + body + "\n\"\"" + body + "\",\r\n";
    }
    paths.push_back(dir.write("f" + std::to_string(file) + ".csv", text));
    expected.push_back(block_of(paths.back(), 1, {rows[0], rows[1], rows[2]}));
    expected.push_back(block_of(paths.back(), 7, {rows[3]}));  // each row before it spans two lines
  }
  dpipe::testing::check_battery([&] { return blocks_of(paths, {}, 3); }, expected, std::nullopt);
}

TEST_CASE("parse_csv in_blocks raises a bad row's DataError or skips it and ends its block there", "[io][csv]") {
  const dpipe::testing::BadCsvFiles files;
  const auto& [dir, unclosed, long_rows, good] = files;
  const auto make = [&](dpipe::OnError on_error, std::vector<std::string> paths) {
    return dpipe::iter::from(std::move(paths)) | dpipe::io::open_files() |
           dpipe::io::parse_csv({.max_row_bytes = 10, .on_error = on_error}, dpipe::io::in_blocks(10));
  };
  SECTION("raise") {
    CHECK_THAT(dpipe::testing::data_error_of(make({}, {unclosed})),
               Catch::Matches("parse_csv#[0-9]+: '" + unclosed +
                              "' line 3 byte offset 13: a quoted field of this row never ends \\(the file ends inside "
                              "its quotes\\)"));
  }
  SECTION("skip: an unclosed quote loses the rest of its file, an overlong row only itself") {
    dpipe::testing::LogCapture log;
    const auto pipe = make(dpipe::OnError::skip(), {unclosed, long_rows, good});
    dpipe::graph::enable_statistics(pipe.ptr());
    const auto blocks = dpipe::testing::collect(pipe);
    CHECK(blocks == std::vector<CsvBlock>{block_of(unclosed, 1, {{"id", "text"}, {"1", "ok"}}),
                                          block_of(long_rows, 1, {{"short", "row"}}),
                                          block_of(long_rows, 4, {{"0123456789"}, {"after"}}),
                                          block_of(good, 1, {{"g"}})});
    for (const auto& block : blocks) {
      // The bad rows' fields read before the failure are gone too: a block crosses to another
      // process whole (its fields end where its rows do).
      CHECK(block.field_ends().size() == block.row_ends().back());
      CHECK(block.buffer().size() == block.field_ends().back());
    }
    files.check_skip_reports(dpipe::graph::statistics(pipe.ptr()), log.messages());
  }
}

TEST_CASE("parse_csv in_blocks restores after a multi-line quoted row without reading the files before it",
          "[io][csv]") {
  const dpipe::testing::MultiLineCsvFiles files;
  const auto& [dir, first, multi] = files;
  const auto make = [&] { return blocks_of({first, multi}, {.on_error = dpipe::OnError::skip()}, 2); };
  const auto pipe = make();
  CHECK(dpipe::testing::take(pipe, 2) ==
        std::vector<CsvBlock>{block_of(first, 1, {{"0"}}), block_of(multi, 1, {{"h1", "h2"}, {"a\nb\r\nc", "1"}})});
  const auto blob = dpipe::graph::save_state(pipe);
  fs::remove(first);  // nothing reads it again
  const auto restored = make();
  dpipe::graph::load_state(restored, blob);
  dpipe::testing::LogCapture log;
  // The next row's line counts the quoted line ends of the rows before the checkpoint.
  CHECK(dpipe::testing::rest(restored) == std::vector<CsvBlock>{block_of(multi, 5, {{"x\"y", "2"}})});
  REQUIRE(log.messages().size() == 1);
  CHECK_THAT(log.messages()[0], Catch::Matches("parse_csv#[0-9]+: '" + multi +
                                               "' line 6 byte offset 26: a quoted field of this row never ends.*"));
}

TEST_CASE("Worker processes and threads parse sharded CSV files in blocks and restore mid-epoch",
          "[io][csv][concurrency]") {
  TempDir dir;
  std::vector<std::string> expected;  // each block's rows as "id:text|", texts with a newline and quotes
  for (int file = 0; file < 6; ++file) {
    std::string text = "id,text\n";
    std::vector<std::string> rows;
    for (int row = 0; row < 5; ++row) {
      const auto id = std::to_string(file * 10 + row);
      rows.push_back(id + ":line\n\"" + id + "\"|");
      text += id + ",\"line\n\"\"" + id + "\"\"\"\n";
    }
    expected.insert(expected.end(), {rows[0] + rows[1], rows[2] + rows[3], rows[4]});
    (void)dir.write("part-" + std::to_string(file) + ".csv", text);
  }
  dpipe::testing::check_workers(
      [&] {
        return dpipe::io::list_files(dir.str(), {"*.csv"}) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() |
               dpipe::io::open_files() | dpipe::io::parse_csv({.skip_lines = 1}, dpipe::io::in_blocks(2));
      },
      expected,
      [](const CsvBlock& block) {
        std::string text;
        for (const auto row : block) ((text += row.at(0)) += ":") += std::string(row.at(1)) + "|";
        return text;
      });
}

// The CSV nodes: parse_csv (rows of strings, typed tuples) and parse_csv_as_dict (records under a
// header). Real files in a fresh directory per test; exact fields for every quoting case; the
// standard battery; bad data (unclosed quotes, overlong rows, fields that do not convert, wrong
// field counts) with exact messages; checkpoints inside files; worker processes and threads.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
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

namespace {

namespace fs = std::filesystem;
using dpipe::DataError;
using dpipe::io::CsvRecord;
using dpipe::io::CsvRow;
using dpipe::testing::TempDir;
using Rows = std::vector<CsvRow>;

static_assert(dpipe::serializable<CsvRecord> && dpipe::copyable_element<CsvRecord>);
static_assert(dpipe::serializable<dpipe::io::PathRow<std::tuple<int, std::string, double>>>);
static_assert(dpipe::io::csv_tuple<std::tuple<std::string, std::int64_t, float>>);
static_assert(!dpipe::io::csv_tuple<std::tuple<bool>> && !dpipe::io::csv_tuple<std::tuple<const char*>>);

/// The rows of `paths` parsed with `options`.
Rows rows_of(const std::vector<std::string>& paths, dpipe::io::CsvOptions options = {}) {
  return dpipe::testing::collect(dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::parse_csv(options));
}

using dpipe::testing::data_error_of;

/// A record's columns as "name=value" strings, in order.
std::vector<std::string> columns_of(const CsvRecord& record) {
  std::vector<std::string> columns;
  for (const auto& field : record) columns.push_back(field.name + "=" + field.value);
  return columns;
}

}  // namespace

TEST_CASE("parse_csv yields the exact fields of quoted and unquoted rows", "[io][csv]") {
  TempDir dir;
  SECTION("the excel dialect's quoting rules") {
    const auto path = dir.write("quoted.csv",
                                "a,\"b,c\",d\n"
                                "\"say \"\"hi\"\"\",,\n"
                                "\"two\nlines\",\"crlf\r\ninside\"\n"
                                "\n"
                                "x\"y,\"ab\"c,\"\"\n"
                                ",\n"
                                "last,row");
    CHECK(rows_of({path}) == Rows{{"a", "b,c", "d"},
                                  {"say \"hi\"", "", ""},
                                  {"two\nlines", "crlf\r\ninside"},
                                  {},
                                  {"x\"y", "abc", ""},
                                  {"", ""},
                                  {"last", "row"}});
  }
  SECTION("\"\\r\\n\" and \"\\r\" line ends and the ends of files") {
    const auto crlf = dir.write("crlf.csv", "one,two\r\n\"3\r\n4\",five\r\n\r\nsix\r\n");
    const auto cr = dir.write("cr.csv", "a\rb,\"c\rd\"\r");
    const auto open_field = dir.write("open.csv", "x,");
    const auto quoted_end = dir.write("quoted_end.csv", "\"q\"");
    const auto empty = dir.write("empty.csv", "");
    CHECK(rows_of({crlf, cr, open_field, quoted_end, empty}) ==
          Rows{{"one", "two"}, {"3\r\n4", "five"}, {}, {"six"}, {"a"}, {"b", "c\rd"}, {"x", ""}, {"q"}});
  }
  SECTION("other delimiters and quotes") {
    const auto semicolons = dir.write("semi.csv", "a;\"b;c\";d\n1,2;3\n");
    const auto tabs = dir.write("tabs.tsv", "a\t\"b\tc\"\t\n");
    CHECK(rows_of({semicolons}, {.delimiter = ';'}) == Rows{{"a", "b;c", "d"}, {"1,2", "3"}});
    CHECK(rows_of({tabs}, {.delimiter = '\t'}) == Rows{{"a", "b\tc", ""}});
    const auto single = dir.write("single.csv", "'it''s',\"x\"\n");
    CHECK(rows_of({single}, {.quotechar = '\''}) == Rows{{"it's", "\"x\""}});
  }
  SECTION("skip_lines skips lines, not rows, before parsing each file") {
    const auto a = dir.write("a.csv", "# comment\r\nkey,item\n\"x\ny\",1\n");
    const auto b = dir.write("b.csv", "only one line");
    CHECK(rows_of({a, b}, {.skip_lines = 1}) == Rows{{"key", "item"}, {"x\ny", "1"}});
    CHECK(rows_of({a, b}, {.skip_lines = 3}) == Rows{{"y\"", "1"}});  // the quote is in an unquoted field
  }
  SECTION("with_path pairs each row with its file") {
    const auto a = dir.write("a.csv", "1,2\n");
    const auto b = dir.write("b.csv", "3\n");
    const auto pipe = dpipe::iter::from(std::vector<std::string>{a, b}) | dpipe::io::open_files() |
                      dpipe::io::parse_csv({}, dpipe::io::with_path);
    CHECK(dpipe::testing::collect(pipe) == std::vector<dpipe::io::PathRow<CsvRow>>{{a, {"1", "2"}}, {b, {"3"}}});
  }
  SECTION("options no file can be parsed with are refused") {
    const auto files = dpipe::iter::from(std::vector<std::string>{}) | dpipe::io::open_files();
    CHECK_THROWS_WITH(files | dpipe::io::parse_csv({.delimiter = '"'}),
                      "parse_csv: the delimiter and the quotechar must differ");
    CHECK_THROWS_WITH(files | dpipe::io::parse_csv_as_dict({.quotechar = '\n'}),
                      "parse_csv_as_dict: the delimiter and the quotechar cannot be a line end");
    CHECK_THROWS_WITH(files | dpipe::io::parse_csv({.max_row_bytes = 0}), "parse_csv: max_row_bytes must be > 0");
  }
}

TEST_CASE("parse_csv runs the standard battery over rows longer than its read block", "[io][csv]") {
  TempDir dir;
  Rows expected;
  std::vector<std::string> paths;
  for (int file = 0; file < 3; ++file) {
    std::string text;
    for (int row = 0; row < 4; ++row) {
      // Quoted fields of up to 100 KiB with line ends and quotes in them: they span read blocks.
      const std::string body = std::string(static_cast<std::size_t>(row) * 33000, 'x');
      expected.push_back({std::to_string(file), body + "\n\"" + body, ""});
      text += std::to_string(file) + ",\"" + body + "\n\"\"" + body + "\",\r\n";
    }
    paths.push_back(dir.write("f" + std::to_string(file) + ".csv", text));
  }
  dpipe::testing::check_battery(
      [&] { return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::parse_csv(); }, expected,
      std::nullopt);
}

TEST_CASE("parse_csv_as converts each field to the tuple's types", "[io][csv]") {
  TempDir dir;
  // [parse_csv_as]
  const auto path = dir.write("fruit.csv", "id,name,weight\n1,apple,0.5\n-2,\"b,c\",1e3\n\n3,x,2.25\n");
  using Row = std::tuple<int, std::string, double>;
  const auto rows = dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files() |
                    dpipe::io::parse_csv_as<Row>({.skip_lines = 1});
  CHECK(dpipe::testing::collect(rows) == std::vector<Row>{{1, "apple", 0.5}, {-2, "b,c", 1000.0}, {3, "x", 2.25}});
  // [parse_csv_as]
  const auto with_path = dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files() |
                         dpipe::io::parse_csv_as<std::tuple<std::uint8_t, std::string>>(
                             {.skip_lines = 2, .max_row_bytes = 100}, dpipe::io::with_path);
  try {
    (void)dpipe::testing::collect(with_path);
    FAIL("no DataError");
  } catch (const DataError& error) {  // the field count is checked before the fields
    CHECK_THAT(error.what(), Catch::Matches("parse_csv_as#[0-9]+: '" + path +
                                            "' line 3 byte offset 27: the row has 3 fields, expected 2"));
  }
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(std::vector<std::string>{path, path}) | dpipe::io::open_files() |
               dpipe::io::parse_csv_as<Row>({.skip_lines = 1});
      },
      std::vector<Row>{{1, "apple", 0.5},
                       {-2, "b,c", 1000.0},
                       {3, "x", 2.25},
                       {1, "apple", 0.5},
                       {-2, "b,c", 1000.0},
                       {3, "x", 2.25}},
      std::nullopt);
}

TEST_CASE("parse_csv_as names the line and column of a field that does not convert", "[io][csv]") {
  TempDir dir;
  const auto parse = [&](const std::string& text, dpipe::OnError on_error = {}) {
    const auto path = dir.write("typed.csv", text);
    return dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files() |
           dpipe::io::parse_csv_as<std::tuple<int, std::string, double>>({.on_error = on_error});
  };
  const std::string path = dir / "typed.csv";
  const std::string prefix = "parse_csv_as#[0-9]+: '" + path + "' ";
  // The node carries the name of the function that made it, in its label and its errors.
  const auto typed = parse("1,a,2\n4,y,z\n");
  CHECK(typed.node().label() == "parse_csv_as#" + std::to_string(typed.node().id()));
  CHECK(data_error_of(typed) ==
        typed.node().label() + ": '" + path + "' line 2 byte offset 6: column 3: 'z' is not a double");
  CHECK_THAT(data_error_of(parse("1,a,2\n4,y,z\n")),
             Catch::Matches(prefix + "line 2 byte offset 6: column 3: 'z' is not a double"));
  CHECK_THAT(data_error_of(parse("99999999999,y,1\n")),
             Catch::Matches(prefix + "line 1 byte offset 0: column 1: '99999999999' is out of range for a 32-bit "
                                     "signed integer"));
  CHECK_THAT(data_error_of(parse("\"a\nb\",y,1\n")),
             Catch::Matches(prefix + "line 1 byte offset 0: column 1: 'a\nb' is not a 32-bit signed integer"));
  CHECK_THAT(data_error_of(parse("\n\n 5,y,1\n")),
             Catch::Matches(prefix + "line 3 byte offset 2: column 1: ' 5' is not a 32-bit signed integer"));
  CHECK_THAT(data_error_of(parse("1,y,1.5x\n")),
             Catch::Matches(prefix + "line 1 byte offset 0: column 3: '1.5x' is not a double"));
  CHECK_THAT(data_error_of(parse("1,\"" + std::string(70, 'q') + "\"\n")),
             Catch::Matches(prefix + "line 1 byte offset 0: the row has 2 fields, expected 3"));
  CHECK_THAT(data_error_of(parse("1,2,3,4\n")),
             Catch::Matches(prefix + "line 1 byte offset 0: the row has 4 fields, expected 3"));

  SECTION("skip: only the bad rows are lost") {
    dpipe::testing::LogCapture log;
    const auto pipe = parse("1,a,2\nx,b,3\n4,c\n5,\"" + std::string(70, 'q') + "\",z\n6,d,7\n", dpipe::OnError::skip());
    CHECK(dpipe::testing::collect(pipe) ==
          std::vector<std::tuple<int, std::string, double>>{{1, "a", 2.0}, {6, "d", 7.0}});
    CHECK(dynamic_cast<const dpipe::io::CsvParser<std::tuple<int, std::string, double>>&>(pipe.node()).skipped() == 3);
    const auto messages = log.messages();
    REQUIRE(messages.size() == 3);
    CHECK_THAT(messages[0], Catch::Matches(prefix + "line 2 byte offset 6: column 1: 'x' is not a 32-bit signed "
                                                    "integer; skipped \\(1 in this epoch\\)"));
    CHECK_THAT(messages[2], Catch::Matches(prefix + "line 4 byte offset 16: column 3: 'z' is not a double; skipped "
                                                    "\\(3 in this epoch\\)"));
  }
}

TEST_CASE("parse_csv_as_dict keys each row by its file's header", "[io][csv]") {
  TempDir dir;
  // [parse_csv_as_dict]
  const auto people = dir.write("people.csv", "id,name\n1,ann\n\n2,\"bob, jr\"\n");
  const auto points = dir.write("points.csv", "x,y,z\n1,2,3\n");
  const auto records = dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{people, points}) |
                                               dpipe::io::open_files() | dpipe::io::parse_csv_as_dict());
  REQUIRE(records.size() == 3);
  CHECK(records[1]["name"] == "bob, jr");
  CHECK(records[2].at("z") == "3");
  CHECK(records[2].size() == 3);
  std::string columns;  // the columns in header order
  for (const auto& [name, value] : records[0]) columns += name + "=" + value + ";";
  CHECK(columns == "id=1;name=ann;");
  CHECK_THROWS_WITH(records[0]["age"], "CsvRecord: no column 'age' (the header is 'id', 'name')");
  // [parse_csv_as_dict]
  CHECK(columns_of(records[0]) == std::vector<std::string>{"id=1", "name=ann"});
  CHECK(columns_of(records[1]) == std::vector<std::string>{"id=2", "name=bob, jr"});
  CHECK(columns_of(records[2]) == std::vector<std::string>{"x=1", "y=2", "z=3"});
  CHECK(records[0].shared_names() == records[1].shared_names());  // one header per file, not per row
  CHECK(records[2].find("w") == nullptr);
  CHECK(records[2].contains("x"));
  CHECK_THROWS_AS(records[0].at("x"), dpipe::KeyError);
  CHECK_THROWS_WITH(CsvRecord().at("x"), "CsvRecord: no column 'x' (the header is empty)");
  CHECK_THROWS_WITH(CsvRecord(records[0].shared_names(), {"1"}), "CsvRecord: 2 names for 1 values");

  SECTION("a name twice in the header: the last column answers, as in Python's dict") {
    const auto twice = dir.write("twice.csv", "a,b,a\n1,2,3\n");
    const auto pipe = dpipe::iter::from(std::vector<std::string>{twice}) | dpipe::io::open_files() |
                      dpipe::io::parse_csv_as_dict({}, dpipe::io::with_path);
    const auto pairs = dpipe::testing::collect(pipe);
    REQUIRE(pairs.size() == 1);
    CHECK(pairs[0].first == twice);
    CHECK(pairs[0].second["a"] == "3");
    CHECK(columns_of(pairs[0].second) == std::vector<std::string>{"a=1", "b=2", "a=3"});
  }
  SECTION("skip_lines comes before the header; an empty or header-only file yields nothing") {
    const auto commented = dir.write("commented.csv", "# units: m\nx,y\n1,2\n");
    const auto header_only = dir.write("header_only.csv", "x,y\n");
    const auto empty = dir.write("empty.csv", "");
    const auto pipe = dpipe::iter::from(std::vector<std::string>{header_only, empty, commented}) |
                      dpipe::io::open_files() | dpipe::io::parse_csv_as_dict({.skip_lines = 1});
    const auto rows = dpipe::testing::collect(pipe);
    REQUIRE(rows.size() == 1);
    CHECK(columns_of(rows[0]) == std::vector<std::string>{"x=1", "y=2"});
  }
  SECTION("a row with another field count than the header is a DataError, where Python fills None") {
    const auto ragged = dir.write("ragged.csv", "id,name\n1\n2,b\n3,c,extra\n");
    const auto make = [&](dpipe::OnError on_error) {
      return dpipe::iter::from(std::vector<std::string>{ragged}) | dpipe::io::open_files() |
             dpipe::io::parse_csv_as_dict({.on_error = on_error});
    };
    CHECK_THAT(data_error_of(make({})),
               Catch::Matches("parse_csv_as_dict#[0-9]+: '" + ragged +
                              "' line 2 byte offset 8: the row has 1 fields, the header has 2"));
    dpipe::testing::LogCapture log;
    const auto rows = dpipe::testing::collect(make(dpipe::OnError::skip()));
    REQUIRE(rows.size() == 1);
    CHECK(columns_of(rows[0]) == std::vector<std::string>{"id=2", "name=b"});
    const auto messages = log.messages();
    REQUIRE(messages.size() == 2);
    CHECK_THAT(messages[1], Catch::Matches("parse_csv_as_dict#[0-9]+: '" + ragged +
                                           "' line 4 byte offset 14: the row has 3 fields, the header has 2; "
                                           "skipped \\(2 in this epoch\\)"));
  }
}

TEST_CASE("parse_csv_as_dict runs the standard battery and its records cross process boundaries", "[io][csv]") {
  TempDir dir;
  const auto a = dir.write("a.csv", "k,v\n1,\"x\ny\"\n2,\n3,z\n");
  const auto b = dir.write("b.csv", "v;k\r\n4;5\r\n");
  const auto header_a = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"k", "v"});
  const auto header_b = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"v;k"});
  const std::vector<CsvRecord> expected{{header_a, {"1", "x\ny"}}, {header_a, {"2", ""}}, {header_a, {"3", "z"}}};
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(std::vector<std::string>{a, a}) | dpipe::io::open_files() |
               dpipe::io::parse_csv_as_dict();
      },
      std::vector<CsvRecord>{expected[0], expected[1], expected[2], expected[0], expected[1], expected[2]},
      std::nullopt);
  CHECK(dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{b}) | dpipe::io::open_files() |
                                dpipe::io::parse_csv_as_dict()) == std::vector<CsvRecord>{{header_b, {"4;5"}}});
  CHECK(dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{b}) | dpipe::io::open_files() |
                                dpipe::io::parse_csv_as_dict({.delimiter = ';'})) ==
        std::vector<CsvRecord>{
            {std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"v", "k"}), {"4", "5"}}});

  std::vector<std::byte> bytes;
  dpipe::ByteWriter writer(bytes);
  for (const auto& record : expected) writer.write(record);
  writer.write(CsvRecord(header_b, {"w"}));
  dpipe::ByteReader reader(bytes);
  std::vector<CsvRecord> decoded;
  while (!reader.at_end()) decoded.push_back(reader.read<CsvRecord>());
  REQUIRE(decoded.size() == 4);
  CHECK(std::vector<CsvRecord>(decoded.begin(), decoded.begin() + 3) == expected);
  CHECK(columns_of(decoded[3]) == std::vector<std::string>{"v;k=w"});
  CHECK(decoded[0].shared_names() == decoded[2].shared_names());  // decoded records share their header again
  CHECK(decoded[0].shared_names() != decoded[3].shared_names());
}

TEST_CASE("parse_csv raises DataError for an unclosed quote and an overlong row or skips and counts", "[io][csv]") {
  const dpipe::testing::BadCsvFiles files;
  const auto& [dir, unclosed, long_rows, good] = files;
  const auto make = [&](dpipe::OnError on_error, std::vector<std::string> paths) {
    return dpipe::iter::from(std::move(paths)) | dpipe::io::open_files() |
           dpipe::io::parse_csv({.max_row_bytes = 10, .on_error = on_error});
  };
  SECTION("raise") {
    try {
      (void)dpipe::testing::collect(make({}, {unclosed}));
      FAIL("no DataError");
    } catch (const DataError& error) {
      CHECK_THAT(error.what(), Catch::Matches("parse_csv#[0-9]+: '" + unclosed +
                                              "' line 3 byte offset 13: a quoted field of this row never ends \\(the "
                                              "file ends inside its quotes\\)"));
      CHECK(error.path() == unclosed);
      CHECK(error.line() == 3);
      CHECK(error.byte_offset() == 13);
    }
    CHECK_THAT(data_error_of(make({}, {long_rows})),
               Catch::Matches("parse_csv#[0-9]+: '" + long_rows +
                              "' line 2 byte offset 10: the row is longer than max_row_bytes \\(10\\)"));
  }
  SECTION("skip: an unclosed quote loses the rest of its file, an overlong row only itself") {
    dpipe::testing::LogCapture log;
    const auto pipe = make(dpipe::OnError::skip(), {unclosed, long_rows, good});
    dpipe::graph::enable_statistics(pipe.ptr());
    CHECK(dpipe::testing::collect(pipe) ==
          Rows{{"id", "text"}, {"1", "ok"}, {"short", "row"}, {"0123456789"}, {"after"}, {"g"}});
    const auto rows = dpipe::graph::statistics(pipe.ptr());
    CHECK(rows.size() == 3);
    files.check_skip_reports(rows, log.messages());
  }
  SECTION("a row too long at the end of a file and one longer than a read block") {
    const auto tail = dir.write("tail.csv", "ok\n01234567890");
    CHECK_THAT(data_error_of(make({}, {tail})), Catch::Matches("parse_csv#[0-9]+: '" + tail +
                                                               "' line 2 byte offset 3: the row is longer than "
                                                               "max_row_bytes \\(10\\)"));
    const auto huge = dir.write("huge.csv", "a,\"" + std::string(200000, ',') + "\"\nb\n");
    const auto pipe = dpipe::iter::from(std::vector<std::string>{huge}) | dpipe::io::open_files() |
                      dpipe::io::parse_csv({.max_row_bytes = 1000, .on_error = dpipe::OnError::skip()});
    dpipe::testing::LogCapture log;
    CHECK(dpipe::testing::collect(pipe) == Rows{{"b"}});
  }
}

TEST_CASE("parse_csv restores after a multi-line quoted row without reading the files before it", "[io][csv]") {
  const dpipe::testing::MultiLineCsvFiles files;
  const auto& [dir, first, multi] = files;
  const auto make = [&] {
    return dpipe::iter::from(std::vector<std::string>{first, multi}) | dpipe::io::open_files() | dpipe::io::parse_csv();
  };
  const auto pipe = make();
  CHECK(dpipe::testing::take(pipe, 3) == Rows{{"0"}, {"h1", "h2"}, {"a\nb\r\nc", "1"}});
  const auto blob = dpipe::graph::save_state(pipe);
  fs::remove(first);  // nothing reads it again
  const auto restored = make();
  dpipe::graph::load_state(restored, blob);
  CHECK(dpipe::testing::take(restored, 1) == Rows{{"x\"y", "2"}});
  // The next row's line counts the quoted line ends of the rows before the checkpoint.
  CHECK_THAT(data_error_of(restored, /*from_start=*/false),
             Catch::Matches("parse_csv#[0-9]+: '" + multi +
                            "' line 6 byte offset 26: a quoted field of this row never ends.*"));
}

TEST_CASE("parse_csv_as_dict restores with the saved header and does not read the file's start", "[io][csv]") {
  TempDir dir;
  const auto path = dir.write("d.csv", "id,name\n1,a\n2,\"b\nc\"\n3,d\n");
  const auto make = [&] {
    return dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files() |
           dpipe::io::parse_csv_as_dict({}, dpipe::io::with_path);
  };
  const auto pipe = make();
  (void)dpipe::testing::take(pipe, 1);
  const auto blob = dpipe::graph::save_state(pipe);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "XX,YYYY\n1,a\n2,\"b\nc\"\n3,d\n";  // same length
  const auto restored = make();
  dpipe::graph::load_state(restored, blob);
  const auto rest = dpipe::testing::collect(restored);
  REQUIRE(rest.size() == 2);
  CHECK(rest[0].first == path);
  CHECK(columns_of(rest[0].second) == std::vector<std::string>{"id=2", "name=b\nc"});
  CHECK(columns_of(rest[1].second) == std::vector<std::string>{"id=3", "name=d"});
  CHECK(rest[0].second.shared_names() == rest[1].second.shared_names());

  SECTION("a file shorter than the checkpoint's offset is refused") {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << "x";
    try {
      dpipe::graph::load_state(make(), blob);
      FAIL("no StateError");
    } catch (const dpipe::StateError& error) {
      CHECK_THAT(error.what(),
                 Catch::Matches("parse_csv_as_dict#[0-9]+: cannot continue the file the checkpoint was reading: "
                                "parse_csv_as_dict#[0-9]+: '" +
                                path +
                                "' byte offset 12: the file has only 1 bytes \\(it changed since the "
                                "checkpoint\\)"));
    }
  }
}

TEST_CASE("Worker processes and threads parse sharded CSV files and restore mid-epoch", "[io][csv][concurrency]") {
  TempDir dir;
  std::vector<std::string> expected;  // "id:text" of each row, texts with a newline and quotes
  for (int file = 0; file < 6; ++file) {
    std::string text = "id,text\n";
    for (int row = 0; row < 5; ++row) {
      const auto id = std::to_string(file * 10 + row);
      expected.push_back(id + ":line\n\"" + id + "\"");
      text += id + ",\"line\n\"\"" + id + "\"\"\"\n";
    }
    (void)dir.write("part-" + std::to_string(file) + ".csv", text);
  }
  const auto files = [&] {
    return dpipe::io::list_files(dir.str(), {"*.csv"}) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() |
           dpipe::io::open_files();
  };
  SECTION("parse_csv") {
    dpipe::testing::check_workers([&] { return files() | dpipe::io::parse_csv({.skip_lines = 1}); }, expected,
                                  [](const CsvRow& row) { return row.at(0) + ":" + row.at(1); });
  }
  SECTION("parse_csv_as") {
    using Row = std::tuple<int, std::string>;
    dpipe::testing::check_workers(
        [&] { return files() | dpipe::io::parse_csv_as<Row>({.skip_lines = 1}); }, expected,
        [](const Row& row) { return std::to_string(std::get<0>(row)) + ":" + std::get<1>(row); });
  }
  SECTION("parse_csv_as_dict") {
    dpipe::testing::check_workers([&] { return files() | dpipe::io::parse_csv_as_dict(); }, expected,
                                  [](const CsvRecord& record) { return record["id"] + ":" + record["text"]; });
  }
}

TEST_CASE("parse_csv reads a file its way in a pipeline", "[io][csv]") {
  TempDir dir;
  (void)dir.write("scores-1.csv", "name,score\nann,3\n");
  (void)dir.write("scores-2.csv", "name,score\n\"bob, jr\",5\n");
  // [parse_csv]
  const auto rows =
      dpipe::io::list_files(dir.str(), {"*.csv"}) | dpipe::io::open_files() | dpipe::io::parse_csv({.skip_lines = 1});
  CHECK(dpipe::testing::collect(rows) == std::vector<std::vector<std::string>>{{"ann", "3"}, {"bob, jr", "5"}});
  // [parse_csv]
}

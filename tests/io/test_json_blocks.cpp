// parse_jsonl in blocks (io::in_blocks) and the JsonBlock it yields: the values of parse_jsonl read
// in place, their lines, the fast path's checks that each value lies alone on its line, bad lines
// raised or skipped with parse_jsonl's messages, the standard battery over blocks that cross the
// reader's buffer, worker processes and threads, and the bytes that cross processes.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/bad_json_lines.hpp"
#include "support/battery.hpp"
#include "support/io_workers.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"
#include "support/temp_dir.hpp"

namespace {

using dpipe::io::Json;
using dpipe::io::JsonBlock;
using dpipe::io::JsonError;
using dpipe::io::JsonView;
using dpipe::testing::TempDir;

/// `paths` parsed by parse_jsonl(options) in blocks of `lines`.
dpipe::IterPipe<JsonBlock> blocks_of(std::vector<std::string> paths, dpipe::io::ParseJsonlOptions options,
                                     std::size_t lines) {
  return dpipe::iter::from(std::move(paths)) | dpipe::io::open_files() |
         dpipe::io::parse_jsonl(options, dpipe::io::in_blocks(lines));
}

/// A block as "path:line:value" per record, each value dumped from its owning Json.
std::vector<std::string> records_of(const JsonBlock& block) {
  std::vector<std::string> records;
  for (std::size_t index = 0; index < block.size(); ++index)
    records.push_back(block.path() + ":" + std::to_string(block.line(index)) + ":" + block[index].to_json().dump());
  return records;
}

/// Every record of `blocks`, one after the other (records_of).
std::vector<std::string> records_of(const std::vector<JsonBlock>& blocks) {
  std::vector<std::string> records;
  for (const auto& block : blocks)
    for (auto& record : records_of(block)) records.push_back(std::move(record));
  return records;
}

}  // namespace

TEST_CASE("JsonView reads a record in place as Json reads it", "[io][json]") {
  TempDir dir;
  const std::string path = dir.write(
      "v.jsonl", R"({"id":7,"name":"caf\u00e9","big":18446744073709551615,"neg":-3,"x":1.5,"ok":true,"no":null,)"
                 R"("tags":["a","b",{"k":[]}],"dup":1,"dup":2,"empty":{}})"
                 "\n42\n");
  const auto blocks = dpipe::testing::collect(blocks_of({path}, {}, 10));
  REQUIRE(blocks.size() == 1);
  const JsonBlock& block = blocks[0];
  REQUIRE(block.size() == 2);
  const JsonView record = block[0];
  CHECK(record.kind() == Json::Kind::kObject);
  CHECK(record.size() == 11);  // the repeated key counts twice, as in Json
  CHECK(record["id"].as_int() == 7);
  CHECK(record["id"].as_uint() == 7);
  CHECK(record["id"].as_double() == 7.0);
  CHECK(record["name"].as_string() == "caf\xc3\xa9");
  CHECK(record["big"].as_uint() == 18446744073709551615ULL);
  CHECK(record["neg"].as_int() == -3);
  CHECK(record["x"].as_double() == 1.5);
  CHECK(record["ok"].as_bool());
  CHECK(record["no"].is_null());
  CHECK(record["tags"].size() == 3);
  CHECK(record["tags"][1].as_string() == "b");
  CHECK(record["tags"][2]["k"].is_array());
  CHECK(record["tags"][2]["k"].size() == 0);
  CHECK(record["dup"].as_int() == 2);  // the last one wins
  CHECK(record["empty"].size() == 0);
  CHECK_FALSE(record.find("missing").has_value());
  std::vector<std::string> tags;
  for (const JsonView tag : record["tags"].elements()) tags.push_back(tag.to_json().dump());
  CHECK(tags == std::vector<std::string>{R"("a")", R"("b")", R"({"k":[]})"});
  std::vector<std::string> keys;
  for (const auto [key, value] : record.members()) keys.emplace_back(key);
  CHECK(keys == std::vector<std::string>{"id", "name", "big", "neg", "x", "ok", "no", "tags", "dup", "dup", "empty"});
  CHECK(record.to_json() == Json::parse(block.text(0)));
  CHECK(block[1].as_int() == 42);
  CHECK(block.line(1) == 2);
  CHECK(block.text(1) == "42");
  CHECK(block.path() == path);

  CHECK_THROWS_MATCHES(record["id"].as_string(), JsonError, Catch::Message("expected a string, got an integer"));
  CHECK_THROWS_MATCHES(record["missing"], JsonError, Catch::Message("no key 'missing'"));
  CHECK_THROWS_MATCHES(record["tags"][3], JsonError, Catch::Message("index 3 out of range: the array has 3 elements"));
  CHECK_THROWS_MATCHES(record[std::size_t{0}], JsonError, Catch::Message("expected an array, got an object"));
  CHECK_THROWS_MATCHES(record["big"].as_int(), JsonError,
                       Catch::Message("expected an integer that fits int64, got 18446744073709551615"));
  CHECK_THROWS_MATCHES(record["neg"].as_uint(), JsonError, Catch::Message("expected a non-negative integer, got -3"));
  CHECK_THROWS_MATCHES(record["x"].size(), JsonError, Catch::Message("expected an array or an object, got a double"));
  CHECK_THROWS_MATCHES(block[1].members(), JsonError, Catch::Message("expected an object, got an integer"));
  CHECK_THROWS_MATCHES(block.at(2), std::out_of_range, Catch::Message("JsonBlock::at: record 2 of a block of 2"));
}

TEST_CASE("parse_jsonl in_blocks yields the values of parse_jsonl in blocks of lines of one file", "[io][json]") {
  TempDir dir;
  const std::string a = dir.write("a.jsonl", "{\"id\":1,\"tags\":[\"x\"]}\n\n{\"id\":2}\n   \n\"just a string\"\n");
  const std::string b = dir.write("b.jsonl", "[1,2]\r\n{\"id\":3,\"text\":\"caf\\u00e9\"}\r\n\r\n42");
  const std::string c = dir.write("c.jsonl", "");
  CHECK(dpipe::testing::collect(blocks_of({a, b, c}, {}, 3) |
                                dpipe::iter::map([](const JsonBlock& block) { return records_of(block); })) ==
        std::vector<std::vector<std::string>>{
            {a + ":1:{\"id\":1,\"tags\":[\"x\"]}", a + ":3:{\"id\":2}"},  // lines 1-3, then 4-5
            {a + ":5:\"just a string\""},
            {b + ":1:[1,2]", b + ":2:{\"id\":3,\"text\":\"caf\xc3\xa9\"}"},
            {b + ":4:42"}});
  const auto one_by_one = dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{a, b, c}) |
                                                  dpipe::io::open_files() | dpipe::io::parse_jsonl());
  for (const std::size_t lines : {std::size_t{1}, std::size_t{2}, std::size_t{4}, std::size_t{1000}}) {
    INFO("blocks of " << lines);
    std::vector<Json> values;
    for (const auto& block : dpipe::testing::collect(blocks_of({a, b, c}, {}, lines)))
      for (const JsonView record : block) values.push_back(record.to_json());
    CHECK(values == one_by_one);
  }
  const auto pipe = blocks_of({a}, {}, 8);
  CHECK(pipe.node().settings() == dpipe::NodeSettings{{"max_line_bytes", "67108864"}, {"lines_per_block", "8"}});
  CHECK_THROWS_WITH(blocks_of({a}, {}, 0), "parse_jsonl: in_blocks needs at least 1 line per block");
  CHECK_THROWS_WITH(blocks_of({a}, {.max_line_bytes = 0}, 4), "parse_jsonl: max_line_bytes must be > 0");
}

TEST_CASE("parse_jsonl in_blocks takes a value only when it lies alone on its line", "[io][json]") {
  // Together these lines are valid JSON text (what simdjson's parse_many reads): each line alone
  // is not, but for "5" and the last one.
  TempDir dir;
  const std::string path = dir.write("spread.jsonl",
                                     "{\"a\":[1,\n"  // line 1: an object that ends on line 2
                                     "2]}\n"
                                     "1 2\n"    // line 3: two scalars
                                     "5\n"      // line 4
                                     "[3]{}\n"  // line 5: two containers
                                     "[\n"      // line 6: an array over three lines
                                     "\n"
                                     "]\n"
                                     "tr\n"  // line 9: an atom cut in two
                                     "ue\n"
                                     "{\"b\":1}");  // line 11
  dpipe::testing::LogCapture log;
  const auto blocks = dpipe::testing::collect(blocks_of({path}, {.on_error = dpipe::OnError::skip()}, 100));
  CHECK(records_of(blocks) == std::vector<std::string>{path + ":4:5", path + ":11:{\"b\":1}"});
  const auto messages = log.messages();
  REQUIRE(messages.size() == 8);
  CHECK_THAT(messages[0], Catch::Matches("parse_jsonl#[0-9]+: '" + path +
                                         "' line 1 byte offset 0: not valid JSON: .*; skipped \\(1 in this epoch\\)"));
  CHECK_THAT(messages[2], Catch::Matches(".* line 3 byte offset 13: not valid JSON: .*"));
  CHECK_THAT(messages[3], Catch::Matches(".* line 5 byte offset 19: not valid JSON: .*"));
  CHECK_THAT(messages[7],
             Catch::Matches(".* line 10 byte offset 33: not valid JSON: .*; skipped \\(8 in this epoch\\)"));
}

TEST_CASE("parse_jsonl in_blocks raises a bad line's DataError or skips it and keeps the rest of its block",
          "[io][json]") {
  TempDir dir;
  const std::string good = dir.write("good.jsonl", "{\"ok\":1}\n{\"ok\":2}\n");
  const std::string bad = dir.write("bad.jsonl", dpipe::testing::bad_json_lines());
  // A bad line behind a line longer than the cursor's 64 KiB buffer, and lines that end in "\r\n":
  // the byte offsets count what the block does not hold.
  const std::string far = dir.write(
      "far.jsonl", "{\"p\":\"" + std::string(70000, 'x') + "\"}\r\n{\"ok\":6}\r\n{\"a\":1,}\r\n{\"ok\":7}\r\n");
  const auto make = [&](dpipe::OnError on_error, std::vector<std::string> paths) {
    return blocks_of(std::move(paths), {.max_line_bytes = 32, .on_error = on_error}, 100);
  };
  SECTION("raise") { dpipe::testing::check_first_bad_json_line_raised(make({}, {good, bad}), bad); }
  SECTION("skip: only the bad lines are lost, each logged with its reason and counted") {
    dpipe::testing::LogCapture log;
    const auto pipe = make(dpipe::OnError::skip(), {bad, good});
    dpipe::graph::enable_statistics(pipe.ptr());
    // The overlong line 9 ends the first block (as in a LineBlock); the errors come in the file's
    // order, as parse_jsonl reports them.
    CHECK(dpipe::testing::collect(pipe | dpipe::iter::map([](const JsonBlock& block) { return records_of(block); })) ==
          std::vector<std::vector<std::string>>{
              {bad + ":1:{\"ok\":3}"}, {bad + ":10:{\"ok\":5}"}, {good + ":1:{\"ok\":1}", good + ":2:{\"ok\":2}"}});
    CHECK(dynamic_cast<const dpipe::io::JsonBlockParser&>(pipe.node()).skipped() == 7);
    dpipe::testing::check_bad_json_lines_skipped(log.messages(), bad);
  }
  SECTION("skip: a bad line's byte offset behind a long line") {
    dpipe::testing::LogCapture log;
    const auto pipe = blocks_of({far}, {.on_error = dpipe::OnError::skip()}, 100);
    CHECK(records_of(dpipe::testing::collect(pipe)) ==
          std::vector<std::string>{far + ":1:{\"p\":\"" + std::string(70000, 'x') + "\"}", far + ":2:{\"ok\":6}",
                                   far + ":4:{\"ok\":7}"});
    const auto messages = log.messages();
    REQUIRE(messages.size() == 1);
    CHECK_THAT(messages[0], Catch::Matches("parse_jsonl#[0-9]+: '" + far +
                                           "' line 3 byte offset 70020: not valid JSON: The JSON document has an "
                                           "improper structure: .*; skipped \\(1 in this epoch\\)"));
  }
}

TEST_CASE("parse_jsonl in_blocks runs the standard battery over blocks that cross its read buffer", "[io][json]") {
  TempDir dir;
  std::vector<std::string> paths;
  std::vector<std::vector<std::string>> expected;
  for (int file = 0; file < 3; ++file) {
    // 3000 records of about 30 to 130 bytes (blocks of 1000 lines cross the reader's 64 KiB
    // buffer), a blank line every 7th, then records of up to 100 KiB, longer than the buffer.
    std::vector<std::string> lines;
    for (int line = 0; line < 3000; ++line)
      lines.push_back(line % 7 == 6
                          ? ""
                          : "{\"file\":" + std::to_string(file) + ",\"line\":" + std::to_string(line) + ",\"text\":\"" +
                                std::string(static_cast<std::size_t>(line % 97), 'a') + "\"}");
    for (int line = 0; line < 3; ++line)
      lines.push_back("[" + std::to_string(file) + ",\"" + std::string(static_cast<std::size_t>(line) * 50000, 'x') +
                      "\"]");
    std::string text;
    for (const auto& line : lines) text += line + (file == 1 ? "\r\n" : "\n");
    paths.push_back(dir.write("f" + std::to_string(file) + ".jsonl", text));
    for (std::size_t first = 0; first < lines.size(); first += 1000) {
      std::vector<std::string> block;
      for (std::size_t line = first; line < std::min(first + 1000, lines.size()); ++line)
        if (!lines[line].empty())
          block.push_back(paths.back() + ":" + std::to_string(line + 1) + ":" + Json::parse(lines[line]).dump());
      expected.push_back(block);
    }
  }
  dpipe::testing::check_battery(
      [&] {
        return blocks_of(paths, {}, 1000) | dpipe::iter::map([](const JsonBlock& block) { return records_of(block); });
      },
      expected, std::nullopt);
}

TEST_CASE("JsonBlock: blocks cross as bytes and corrupt bytes are refused", "[io][json]") {
  static_assert(dpipe::serializable<JsonBlock>);
  TempDir dir;
  const std::string path = dir.write("x.jsonl", "{\"a\":[1,\"two\"]}\n\n\"s\"\n");
  const auto blocks = dpipe::testing::collect(blocks_of({path}, {}, 10));
  REQUIRE(blocks.size() == 1);
  const auto bytes = dpipe::to_bytes(blocks[0]);
  const auto decoded = dpipe::from_bytes<JsonBlock>(bytes);
  CHECK(decoded == blocks[0]);
  CHECK(records_of(decoded) == std::vector<std::string>{path + ":1:{\"a\":[1,\"two\"]}", path + ":3:\"s\""});
  CHECK(decoded[0]["a"][1].as_string() == "two");
  CHECK(dpipe::from_bytes<JsonBlock>(dpipe::to_bytes(JsonBlock())) == JsonBlock());

  // The last 24 bytes are the last record (line, tape, strings): on line 0 it is not after record 0.
  auto moved = bytes;
  moved[moved.size() - 24] = std::byte{0};
  CHECK_THROWS_MATCHES(dpipe::from_bytes<JsonBlock>(moved), dpipe::SerializationError,
                       Catch::Message("corrupt input: a JsonBlock whose record 1 does not check out"));
  const std::vector<std::byte> cut(bytes.begin(), bytes.end() - 1);
  CHECK_THROWS_AS(dpipe::from_bytes<JsonBlock>(cut), dpipe::SerializationError);
}

TEST_CASE("Worker processes and threads parse sharded JSON lines in blocks and restore mid-epoch",
          "[io][json][concurrency]") {
  TempDir dir;
  std::vector<std::string> expected;  // each block as "file:line:value,..."
  for (std::size_t file = 0; file < 8; ++file) {
    std::string text;
    for (std::size_t line = 0; line < 5; ++line) text += "{\"n\":" + std::to_string(file * 10 + line) + "}\n";
    const std::string path = dir.write("part-" + std::to_string(file) + ".jsonl", text);
    for (std::size_t first = 0; first < 5; first += 2) {
      std::string block;
      for (std::size_t line = first; line < std::min<std::size_t>(first + 2, 5); ++line)
        block += path + ":" + std::to_string(line + 1) + ":" + std::to_string(file * 10 + line) + ",";
      expected.push_back(block);
    }
  }
  dpipe::testing::check_workers(
      [&] {
        return dpipe::io::list_files(dir.str(), {"*.jsonl"}) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() |
               dpipe::io::open_files() | dpipe::io::parse_jsonl({}, dpipe::io::in_blocks(2));
      },
      expected,
      [](const JsonBlock& block) {
        std::string text;
        for (std::size_t index = 0; index < block.size(); ++index)
          text += block.path() + ":" + std::to_string(block.line(index)) + ":" +
                  std::to_string(block[index]["n"].as_int()) + ",";
        return text;
      });
}

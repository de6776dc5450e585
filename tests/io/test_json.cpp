// JSON in the I/O wing: the io::Json value (accessors, errors, dump, equality, serialization) and
// the nodes parse_jsonl and parse_json_files over real files: the standard battery, malformed
// lines with their exact messages, the skip policy, mid-file restores, worker processes and threads.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
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

namespace Catch {
template <>
struct StringMaker<dpipe::io::Json> {
  static std::string convert(const dpipe::io::Json& value) { return value.dump(); }
};
}  // namespace Catch

namespace {

namespace fs = std::filesystem;
using dpipe::DataError;
using dpipe::io::Json;
using dpipe::io::JsonError;
using dpipe::io::PathJson;
using dpipe::testing::TempDir;

std::vector<std::string> dumps(const std::vector<Json>& values) {
  std::vector<std::string> texts;
  for (const auto& value : values) texts.push_back(value.dump());
  return texts;
}

}  // namespace

TEST_CASE("Json: kinds and accessors", "[io][json]") {
  const Json record = Json::object({{"id", 7},
                                    {"text", "hello"},
                                    {"score", 0.5},
                                    {"ok", true},
                                    {"none", nullptr},
                                    {"tags", Json::array({"a", "b"})},
                                    {"big", std::uint64_t{18446744073709551615U}}});
  CHECK(record.is_object());
  CHECK(record.size() == 7);
  CHECK(record["id"].is_int());
  CHECK(record["id"].is_uint());
  CHECK(record["id"].as_int() == 7);
  CHECK(record["id"].as_uint() == 7);
  CHECK(record["id"].as_double() == 7.0);
  CHECK(record["text"].as_string() == "hello");
  CHECK(record["score"].is_double());
  CHECK(record["score"].is_number());
  CHECK(record["score"].as_double() == 0.5);
  CHECK(record["ok"].as_bool());
  CHECK(record["none"].is_null());
  CHECK(record["tags"].is_array());
  CHECK(record["tags"][1].as_string() == "b");
  CHECK(record["big"].kind() == Json::Kind::kUint);
  CHECK_FALSE(record["big"].is_int());
  CHECK(record["big"].as_uint() == 18446744073709551615U);
  CHECK(record.find("missing") == nullptr);
  REQUIRE(record.find("id") != nullptr);
  CHECK(record.find("id")->as_int() == 7);
  CHECK(Json(5U) == Json(5));
  CHECK(Json(5U).kind() == Json::Kind::kInt);
  CHECK(Json(-3).as_int() == -3);
  CHECK(Json() == Json(nullptr));
  CHECK_FALSE(Json(1) == Json(1.0));

  std::vector<std::string> keys;
  for (const auto& [key, member] : record.as_object()) keys.push_back(key);
  CHECK(keys == std::vector<std::string>{"id", "text", "score", "ok", "none", "tags", "big"});
  std::vector<std::string> tags;
  for (const Json& tag : record["tags"].as_array()) tags.push_back(tag.as_string());
  CHECK(tags == std::vector<std::string>{"a", "b"});

  Json mutable_record = record;
  std::string taken = std::move(mutable_record["text"].as_string());
  CHECK(taken == "hello");
  mutable_record["tags"].as_array().push_back(Json("c"));
  CHECK(mutable_record["tags"].size() == 3);
  CHECK(record["tags"].size() == 2);
}

TEST_CASE("Json: errors name what was expected and what was found", "[io][json]") {
  const Json record = Json::object({{"id", 7}, {"tags", Json::array({"a"})}});
  CHECK_THROWS_MATCHES(record["tags"]["label"], JsonError, Catch::Message("expected an object, got an array"));
  CHECK_THROWS_MATCHES(record["label"], JsonError, Catch::Message("no key 'label'"));
  CHECK_THROWS_MATCHES(record["tags"][1], JsonError, Catch::Message("index 1 out of range: the array has 1 elements"));
  CHECK_THROWS_MATCHES(record[0], JsonError, Catch::Message("expected an array, got an object"));
  CHECK_THROWS_MATCHES(record["id"].as_string(), JsonError, Catch::Message("expected a string, got an integer"));
  CHECK_THROWS_MATCHES(record["id"].as_bool(), JsonError, Catch::Message("expected a bool, got an integer"));
  CHECK_THROWS_MATCHES(record["id"].size(), JsonError,
                       Catch::Message("expected an array or an object, got an integer"));
  CHECK_THROWS_MATCHES(record["id"].find("x"), JsonError, Catch::Message("expected an object, got an integer"));
  CHECK_THROWS_MATCHES(Json(0.5).as_int(), JsonError, Catch::Message("expected an integer, got a double"));
  CHECK_THROWS_MATCHES(Json("7").as_double(), JsonError, Catch::Message("expected a number, got a string"));
  CHECK_THROWS_MATCHES(Json().as_array(), JsonError, Catch::Message("expected an array, got null"));
  CHECK_THROWS_MATCHES(Json(true).as_object(), JsonError, Catch::Message("expected an object, got a bool"));
  CHECK_THROWS_MATCHES(Json(-3).as_uint(), JsonError, Catch::Message("expected a non-negative integer, got -3"));
  CHECK_THROWS_MATCHES(Json(std::uint64_t{9223372036854775808U}).as_int(), JsonError,
                       Catch::Message("expected an integer that fits int64, got 9223372036854775808"));
  CHECK_THROWS_AS(record["label"], dpipe::Error);
}

TEST_CASE("Json: parse reads big unsigned integers nested values and unicode escapes", "[io][json]") {
  const Json value = Json::parse(
      R"({"max":18446744073709551615,"min":-9223372036854775808,"edge":9223372036854775807,)"
      R"("nested":{"a":[1,[2,{"b":null}],{}],"c":[]},"text":"caf\u00e9 \ud83d\ude00 \"q\" \\ \n","raw":"é",)"
      R"("f":1.5e3,"neg":-0.25,"t":true,"n":null})");
  CHECK(value["max"].kind() == Json::Kind::kUint);
  CHECK(value["max"].as_uint() == 18446744073709551615U);
  CHECK(value["min"].as_int() == INT64_MIN);
  CHECK(value["edge"].kind() == Json::Kind::kInt);
  CHECK(value["edge"].as_int() == INT64_MAX);
  CHECK(value["nested"]["a"][1][1]["b"].is_null());
  CHECK(value["nested"]["a"][2].size() == 0);
  CHECK(value["nested"]["c"].size() == 0);
  CHECK(value["text"].as_string() == "caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\" \\ \n");
  CHECK(value["raw"].as_string() == "\xc3\xa9");
  CHECK(value["f"].as_double() == 1500.0);
  CHECK(value["neg"].as_double() == -0.25);
  CHECK(value.dump() == R"({"max":18446744073709551615,"min":-9223372036854775808,"edge":9223372036854775807,)"
                        R"("nested":{"a":[1,[2,{"b":null}],{}],"c":[]},"text":"caf)"
                        "\xc3\xa9 \xf0\x9f\x98\x80"
                        R"( \"q\" \\ \n","raw":")"
                        "\xc3\xa9"
                        R"(","f":1500.0,"neg":-0.25,"t":true,"n":null})");
  CHECK(value == Json::parse(value.dump()));
  CHECK(Json::parse(" [1, 2.0, \"x\"] ") == Json::array({1, 2.0, "x"}));
  CHECK_THROWS_MATCHES(Json::parse("18446744073709551616"), JsonError,
                       Catch::Message("not valid JSON: Problem while parsing a number"));
  CHECK_THROWS_MATCHES(Json::parse("{\"a\":1,}"), JsonError,
                       Catch::Message("not valid JSON: The JSON document has an improper structure: "
                                      "missing or superfluous commas, braces, missing keys, etc."));
  CHECK_THROWS_MATCHES(Json::parse(" "), JsonError, Catch::Message("not valid JSON: Empty: no JSON found"));
}

TEST_CASE("Json: dump writes compact JSON text", "[io][json]") {
  CHECK(Json().dump() == "null");
  CHECK(Json(false).dump() == "false");
  CHECK(Json(-12).dump() == "-12");
  CHECK(Json(1.0).dump() == "1.0");
  CHECK(Json(0.1).dump() == "0.1");
  CHECK(Json(1e16).dump() == "1e+16");
  CHECK(Json(1e-5).dump() == "1e-05");
  CHECK(Json(-2.5).dump() == "-2.5");
  CHECK(Json(std::numeric_limits<double>::infinity()).dump() == "Infinity");
  CHECK(Json(std::numeric_limits<double>::quiet_NaN()).dump() == "NaN");
  CHECK(Json("tab\there \x01 \"quoted\" back\\slash").dump() == R"("tab\there \u0001 \"quoted\" back\\slash")");
  CHECK(Json::object({{"k", Json::array({1, Json::object({})})}, {"e", Json::array()}}).dump() ==
        R"({"k":[1,{}],"e":[]})");
}

TEST_CASE("Json: duplicate keys are kept and lookups find the last", "[io][json]") {
  const Json value = Json::parse(R"({"a":1,"b":2,"a":3})");
  CHECK(value.size() == 3);
  CHECK(value["a"].as_int() == 3);
  CHECK(value.find("a")->as_int() == 3);
  CHECK(value.dump() == R"({"a":1,"b":2,"a":3})");
}

TEST_CASE("Json: values cross as bytes and corrupt bytes are refused", "[io][json]") {
  const Json value =
      Json::parse(R"({"s":"text that is longer than the small string buffer","i":-5,"u":18446744073709551615,)"
                  R"("d":2.5,"b":false,"n":null,"a":[[],[1,{"x":"y"}]]})");
  const auto bytes = dpipe::to_bytes(value);
  CHECK(dpipe::from_bytes<Json>(bytes) == value);
  CHECK(dpipe::from_bytes<Json>(bytes).dump() == value.dump());
  static_assert(dpipe::serializable<Json>);
  static_assert(dpipe::serializable<PathJson>);

  auto bad_kind = bytes;
  bad_kind[0] = std::byte{42};
  CHECK_THROWS_MATCHES(dpipe::from_bytes<Json>(bad_kind), dpipe::SerializationError,
                       Catch::Message("corrupt input: 42 is not a Json kind"));
  std::vector<std::byte> deep;
  for (int level = 0; level < 1100; ++level) {
    deep.push_back(std::byte{6});  // an array
    deep.push_back(std::byte{1});  // of one element (a little-endian count of 1)
    for (int i = 0; i < 7; ++i) deep.push_back(std::byte{0});
  }
  deep.push_back(std::byte{0});
  CHECK_THROWS_MATCHES(dpipe::from_bytes<Json>(deep), dpipe::SerializationError,
                       Catch::Message("corrupt input: a Json value nested deeper than 1024 levels"));
}

namespace {

/// JSON lines files: blank lines, "\r\n" endings, a last line without a newline, an empty file.
struct JsonlFiles {
  TempDir dir;
  std::string a = dir.write("a.jsonl", "{\"id\":1,\"tags\":[\"x\"]}\n\n{\"id\":2}\n   \n\"just a string\"\n");
  std::string b = dir.write("b.jsonl", "[1,2]\r\n{\"id\":3,\"text\":\"caf\\u00e9\"}\r\n\r\n42");
  std::string c = dir.write("c.jsonl", "");
};

}  // namespace

TEST_CASE("parse_jsonl yields one value per non-blank line", "[io][json]") {
  JsonlFiles files;
  // [parse_jsonl]
  auto records = dpipe::io::list_files(files.dir.str(), {"*.jsonl"})  // paths, sorted
                 | dpipe::io::open_files()                            // opened in the worker
                 | dpipe::io::parse_jsonl();                          // one io::Json per line
  std::vector<std::int64_t> ids;
  for (const dpipe::io::Json& record : records) {
    if (record.is_object()) ids.push_back(record["id"].as_int());  // JsonError if it is not an integer
  }
  // [parse_jsonl]
  CHECK(ids == std::vector<std::int64_t>{1, 2, 3});
  CHECK(dumps(dpipe::testing::collect(records)) == std::vector<std::string>{R"({"id":1,"tags":["x"]})", R"({"id":2})",
                                                                            R"("just a string")", "[1,2]",
                                                                            R"({"id":3,"text":"caf)"
                                                                            "\xc3\xa9"
                                                                            R"("})",
                                                                            "42"});
  const auto with_path = dpipe::io::list_files(files.dir.str()) | dpipe::io::open_files() |
                         dpipe::io::parse_jsonl({}, dpipe::io::with_path);
  const auto pairs = dpipe::testing::collect(with_path);
  REQUIRE(pairs.size() == 6);
  CHECK(pairs[0] == PathJson{files.a, Json::object({{"id", 1}, {"tags", Json::array({"x"})}})});
  CHECK(pairs[2] == PathJson{files.a, Json("just a string")});
  CHECK(pairs[5] == PathJson{files.b, Json(42)});
  CHECK(records.node().settings() == dpipe::NodeSettings{{"max_line_bytes", "67108864"}});
  CHECK_THROWS_WITH(
      dpipe::io::list_files(files.dir.str()) | dpipe::io::open_files() | dpipe::io::parse_jsonl({.max_line_bytes = 0}),
      "parse_jsonl: max_line_bytes must be > 0");
}

TEST_CASE("parse_jsonl runs the standard battery over lines longer than its read block", "[io][json]") {
  TempDir dir;
  std::vector<Json> expected;
  std::vector<std::string> paths;
  for (int file = 0; file < 3; ++file) {
    std::string text;
    for (int line = 0; line < 4; ++line) {
      // Strings of up to 100 KiB: lines longer than the 64 KiB blocks the cursor reads.
      const std::string payload(static_cast<std::size_t>(line) * 33000, 'x');
      expected.push_back(Json::object({{"file", file}, {"line", line}, {"payload", payload}}));
      text += "{\"file\":" + std::to_string(file) + ",\"line\":" + std::to_string(line) + ",\"payload\":\"" + payload +
              "\"}\n";
      if (line == 1) text += "\n";  // a blank line is not an element
    }
    paths.push_back(dir.write("f" + std::to_string(file) + ".jsonl", text));
  }
  dpipe::testing::check_battery(
      [&] { return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::parse_jsonl(); }, expected,
      std::nullopt);
}

TEST_CASE("parse_jsonl raises DataError naming the line or skips and counts", "[io][json]") {
  TempDir dir;
  const std::string good = dir.write("good.jsonl", "{\"ok\":1}\n{\"ok\":2}\n");
  const std::string bad = dir.write("bad.jsonl", dpipe::testing::bad_json_lines());
  const auto make = [&](dpipe::OnError on_error, std::vector<std::string> paths) {
    return dpipe::iter::from(std::move(paths)) | dpipe::io::open_files() |
           dpipe::io::parse_jsonl({.max_line_bytes = 32, .on_error = on_error});
  };
  SECTION("raise") { dpipe::testing::check_first_bad_json_line_raised(make({}, {good, bad}), bad); }
  SECTION("skip: only the bad lines are lost, each logged with its reason and counted") {
    dpipe::testing::LogCapture log;
    const auto pipe = make(dpipe::OnError::skip(), {bad, good});
    dpipe::graph::enable_statistics(pipe.ptr());
    CHECK(dumps(dpipe::testing::collect(pipe)) ==
          std::vector<std::string>{R"({"ok":3})", R"({"ok":5})", R"({"ok":1})", R"({"ok":2})"});
    CHECK(dynamic_cast<const dpipe::io::JsonLinesParser<Json>&>(pipe.node()).skipped() == 7);
    const auto rows = dpipe::graph::statistics(pipe.ptr());
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].label.starts_with("parse_jsonl#"));
    CHECK(rows[0].skipped == 7);
    dpipe::testing::check_bad_json_lines_skipped(log.messages(), bad);
  }
}

TEST_CASE("parse_jsonl restores inside a file without reading the files before it", "[io][json]") {
  JsonlFiles files;
  const std::vector<std::string> paths{files.a, files.b};
  const auto make = [&] {
    return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::parse_jsonl({}, dpipe::io::with_path);
  };
  const auto pipe = make();
  (void)dpipe::testing::take(pipe, 4);  // a.jsonl and the first line of b.jsonl
  const auto blob = dpipe::graph::save_state(pipe);
  fs::remove(files.a);  // nothing reads it again
  const auto restored = make();
  dpipe::graph::load_state(restored, blob);
  CHECK(dpipe::testing::collect(restored) ==
        std::vector<PathJson>{{files.b, Json::object({{"id", 3}, {"text", "caf\xc3\xa9"}})}, {files.b, Json(42)}});
}

TEST_CASE("parse_json_files yields each whole file as one document", "[io][json]") {
  TempDir dir;
  const std::string a = dir.write("a.json", "{\n  \"name\": \"a\",\n  \"values\": [1, 2.5, null]\n}\n");
  const std::string b = dir.write("b.json", "[\"b\"]");
  const std::string c = dir.write("c.json", "  7 \n");
  const std::vector<PathJson> expected{
      {a, Json::object({{"name", "a"}, {"values", Json::array({1, 2.5, nullptr})}})},
      {b, Json::array({"b"})},
      {c, Json(7)},
  };
  // [parse_json_files]
  auto documents = dpipe::io::list_files(dir.str(), {"*.json"}) | dpipe::io::open_files() |
                   dpipe::io::parse_json_files({.max_file_bytes = 1 << 20});
  std::vector<std::string> names;
  for (const auto& [path, document] : documents) {
    if (const auto* name = document.is_object() ? document.find("name") : nullptr) names.push_back(name->as_string());
  }
  // [parse_json_files]
  CHECK(names == std::vector<std::string>{"a"});
  CHECK(dpipe::testing::collect(documents) == expected);
  dpipe::testing::check_battery(
      [&] { return dpipe::io::list_files(dir.str()) | dpipe::io::open_files() | dpipe::io::parse_json_files(); },
      expected, std::nullopt);
  CHECK(documents.node().settings() == dpipe::NodeSettings{{"max_file_bytes", "1048576"}});
  CHECK_THROWS_WITH(
      dpipe::io::list_files(dir.str()) | dpipe::io::open_files() | dpipe::io::parse_json_files({.max_file_bytes = 0}),
      "parse_json_files: max_file_bytes must be > 0");

  SECTION("a file larger than the read block and the parser's kept buffers") {
    std::string text = "[";
    for (int i = 0; i < 400000; ++i) text += std::to_string(i) + (i + 1 < 400000 ? "," : "]");
    const std::string big = dir.write("big/big.json", text);
    const auto read = dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{big, b}) |
                                              dpipe::io::open_files() | dpipe::io::parse_json_files());
    REQUIRE(read.size() == 2);
    CHECK(read[0].second.size() == 400000);
    CHECK(read[0].second[399999].as_int() == 399999);
    CHECK(read[1] == expected[1]);
  }
}

TEST_CASE("parse_json_files raises DataError naming the file or skips it", "[io][json]") {
  TempDir dir;
  const std::string good = dir.write("1-good.json", "{\"ok\":true}");
  const std::string malformed = dir.write("2-malformed.json", "{\"a\": [1, 2}");
  const std::string empty = dir.write("3-empty.json", "\n");
  const std::string large = dir.write("4-large.json", "[" + std::string(100, ' ') + "]");
  const auto make = [&](dpipe::OnError on_error, std::vector<std::string> paths) {
    return dpipe::iter::from(std::move(paths)) | dpipe::io::open_files() |
           dpipe::io::parse_json_files({.max_file_bytes = 64, .on_error = on_error});
  };
  const auto message_of = [&](const std::string& path) {
    try {
      (void)dpipe::testing::collect(make({}, {good, path}));
    } catch (const DataError& error) {
      CHECK(error.path() == path);
      return std::string(error.what());
    }
    return std::string("no DataError");
  };
  CHECK_THAT(message_of(malformed),
             Catch::Matches("parse_json_files#[0-9]+: '" + malformed +
                            "': not valid JSON: The JSON document has an improper structure: .*"));
  CHECK_THAT(message_of(empty),
             Catch::Matches("parse_json_files#[0-9]+: '" + empty + "': not valid JSON: Empty: no JSON found"));
  CHECK_THAT(message_of(large), Catch::Matches("parse_json_files#[0-9]+: '" + large +
                                               "': the file is larger than max_file_bytes \\(64\\)"));

  dpipe::testing::LogCapture log;
  const auto pipe = make(dpipe::OnError::skip(), {malformed, empty, good, large, good});
  CHECK(dpipe::testing::collect(pipe) ==
        std::vector<PathJson>{{good, Json::object({{"ok", true}})}, {good, Json::object({{"ok", true}})}});
  CHECK(dynamic_cast<const dpipe::io::JsonFilesParser&>(pipe.node()).skipped() == 3);
  CHECK(log.messages().size() == 3);
}

TEST_CASE("Worker processes and threads parse sharded JSON lines and files and restore mid-epoch",
          "[io][json][concurrency]") {
  TempDir dir;
  std::vector<std::string> lines;  // each line's text, which is also its value's dump()
  std::vector<std::string> documents;
  for (int file = 0; file < 6; ++file) {
    std::string text;
    for (int line = 0; line < 5; ++line) {
      const int id = file * 10 + line;
      lines.push_back(R"({"id":)" + std::to_string(id) + R"(,"text":"record number )" + std::to_string(id) +
                      R"(","big":18446744073709551615})");
      text += lines.back() + "\n";
    }
    (void)dir.write("part-" + std::to_string(file) + ".jsonl", text);
    documents.push_back(R"({"file":)" + std::to_string(file) + "}");
    (void)dir.write("doc-" + std::to_string(file) + ".json", documents.back());
  }
  const auto files = [&](const char* mask) {
    return dpipe::io::list_files(dir.str(), {mask}) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() |
           dpipe::io::open_files();
  };
  SECTION("parse_jsonl") {
    dpipe::testing::check_workers([&] { return files("*.jsonl") | dpipe::io::parse_jsonl(); }, lines,
                                  [](const Json& value) { return value.dump(); });
  }
  SECTION("parse_json_files") {
    dpipe::testing::check_workers([&] { return files("*.json") | dpipe::io::parse_json_files(); }, documents,
                                  [](const PathJson& file) { return file.second.dump(); });
  }
}

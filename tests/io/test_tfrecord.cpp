// TFRecord files: tfrecord_records and load_from_tfrecord. The CRC32C against published vectors;
// files written by the test's own TFRecord writer and protobuf encoder (packed and unpacked
// lists, unknown fields); the standard battery; truncated, corrupt and malformed records with
// exact messages; the skip policy; mid-file restores, gzip-compressed files, worker processes
// and threads.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "io/crc32c.hpp"
#include "support/archive_writer.hpp"
#include "support/battery.hpp"
#include "support/data_error.hpp"
#include "support/io_workers.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"
#include "support/temp_dir.hpp"
#include "support/tfrecord_writer.hpp"

namespace {

namespace fs = std::filesystem;
using dpipe::DataError;
using dpipe::io::BytesList;
using dpipe::io::FloatList;
using dpipe::io::Int64List;
using dpipe::io::TFExample;
using dpipe::testing::TempDir;

using dpipe::testing::bytes_feature;
using dpipe::testing::delimited;
using dpipe::testing::example;
using dpipe::testing::float_feature;
using dpipe::testing::frames;
using dpipe::testing::int64_feature;
using dpipe::testing::tag;
using dpipe::testing::varint;

/// An Example holding only "id": [id], packed or not.
std::string id_example(std::int64_t id, bool packed = true) { return example({{"id", int64_feature({id}, packed)}}); }

TFExample id_map(std::int64_t id) { return {{"id", Int64List{id}}}; }

auto records_of(const std::vector<std::string>& paths, dpipe::io::TFRecordOptions options = {}) {
  return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::tfrecord_records(options);
}

auto examples_of(const std::vector<std::string>& paths, dpipe::io::TFRecordOptions options = {}) {
  return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::load_from_tfrecord(options);
}

using dpipe::testing::data_error_of;

}  // namespace

TEST_CASE("crc32c matches the published vectors with and without SSE4.2", "[io][tfrecord]") {
  using dpipe::io::detail::crc32c_extend;
  using dpipe::io::detail::crc32c_extend_portable;
  std::string ascending;
  std::string descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  // RFC 3720 B.4, and the usual check value.
  const std::vector<std::pair<std::string, std::uint32_t>> vectors{{std::string(32, '\0'), 0x8A9136AAU},
                                                                   {std::string(32, '\xff'), 0x62A8AB43U},
                                                                   {ascending, 0x46DD794EU},
                                                                   {descending, 0x113FDB5CU},
                                                                   {"123456789", 0xE3069283U},
                                                                   {"", 0U}};
  for (const auto& [bytes, crc] : vectors) {
    CHECK(crc32c_extend(0, bytes.data(), bytes.size()) == crc);
    CHECK(crc32c_extend_portable(0, bytes.data(), bytes.size()) == crc);
  }
  CHECK(crc32c_extend(crc32c_extend(0, "1234", 4), "56789", 5) == 0xE3069283U);
  CHECK(crc32c_extend_portable(crc32c_extend_portable(0, "12345", 5), "6789", 4) == 0xE3069283U);
  // Every length and alignment: the instruction and the table agree.
  std::string noise;
  for (int i = 0; i < 300; ++i) noise.push_back(static_cast<char>((i * 7919 + 13) & 0xff));
  for (std::size_t start = 0; start < 9; ++start)
    for (std::size_t size = 0; size + start <= noise.size(); size += 7)
      CHECK(crc32c_extend(5, noise.data() + start, size) == crc32c_extend_portable(5, noise.data() + start, size));
  INFO("uses SSE4.2: " << dpipe::io::detail::crc32c_uses_hardware());
  CHECK(dpipe::io::detail::crc32c_mask(0) == 0xa282ead8U);
}

TEST_CASE("tfrecord_records yields each record's bytes across block boundaries", "[io][tfrecord]") {
  TempDir dir;
  const std::string large(300000, 'L');   // read straight into its string
  const std::string medium(190000, 'm');  // just within the buffer
  std::string binary(70000, '\0');
  for (std::size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>(i * 31);
  const std::vector<std::string> first{"alpha", "", binary, large, "omega"};
  const std::vector<std::string> second{medium, medium + "!", "z"};
  const std::vector<std::string> paths{dir.write("a.tfrecord", frames(first)), dir.write("empty.tfrecord", ""),
                                       dir.write("b.tfrecord", frames(second))};
  std::vector<std::string> expected = first;
  expected.insert(expected.end(), second.begin(), second.end());
  CHECK(dpipe::testing::collect(records_of(paths)) == expected);
  const auto pipe = records_of(paths, {.verify_crc = false, .max_record_bytes = 1000});
  CHECK(pipe.node().settings() == dpipe::NodeSettings{{"verify_crc", "false"}, {"max_record_bytes", "1000"}});
  CHECK_THROWS_WITH(records_of(paths, {.max_record_bytes = 0}), "tfrecord_records: max_record_bytes must be > 0");
}

TEST_CASE("tfrecord_records runs the standard battery", "[io][tfrecord]") {
  TempDir dir;
  std::vector<std::string> expected;
  std::vector<std::string> paths;
  for (int file = 0; file < 3; ++file) {
    std::vector<std::string> records;
    for (int record = 0; record < 4; ++record)
      records.push_back(std::to_string(file) + ":" + std::string(static_cast<std::size_t>(record) * 50000, 'r'));
    expected.insert(expected.end(), records.begin(), records.end());
    paths.push_back(dir.write("f" + std::to_string(file) + ".tfrecord", frames(records)));
  }
  dpipe::testing::check_battery([&] { return records_of(paths); }, expected, std::nullopt);
}

TEST_CASE("load_from_tfrecord decodes packed and unpacked lists and skips unknown fields", "[io][tfrecord]") {
  TempDir dir;
  // Unknown fields everywhere: a varint, a fixed64 and a group in the Example, a fixed32 in the
  // Features, a string in an entry, a varint in a Feature and in each list.
  const std::string group = tag(9, 3) + tag(1, 0) + varint(5) + tag(9, 4);
  const std::string features =
      delimited(1, delimited(1, "name") + delimited(7, "ignored") + delimited(2, bytes_feature({"ab", "", "c"}))) +
      tag(5, 5) + "abcd" +
      delimited(1, delimited(1, "packed_floats") + delimited(2, float_feature({1.5F, -2.0F}, true))) +
      delimited(1, delimited(1, "floats") + delimited(2, float_feature({0.25F, 3.0F, 1e30F}, false))) +
      delimited(1, delimited(1, "packed_ints") + delimited(2, int64_feature({0, -1, 300, INT64_MIN}, true))) +
      delimited(1, delimited(1, "ints") + delimited(2, tag(4, 0) + varint(1) + int64_feature({7, -7}, false))) +
      delimited(1, delimited(1, "unknown_in_list") +
                       delimited(2, delimited(3, tag(2, 0) + varint(9) + tag(1, 0) + varint(42)))) +
      delimited(1, delimited(1, "no_list") + delimited(2, "")) +
      delimited(1, delimited(1, "name") + delimited(2, bytes_feature({"last", "wins"}))) +
      delimited(1, delimited(1, "empty_floats") + delimited(2, float_feature({}, true)));
  const std::string record = tag(3, 0) + varint(1234567) + tag(2, 1) + "12345678" + group + delimited(1, features);
  const std::string path =
      dir.write("examples.tfrecord", frames({record, example({}), id_example(-5, false), id_example(99)}));

  const TFExample first{{"name", BytesList{"last", "wins"}},
                        {"packed_floats", FloatList{1.5F, -2.0F}},
                        {"floats", FloatList{0.25F, 3.0F, 1e30F}},
                        {"packed_ints", Int64List{0, -1, 300, INT64_MIN}},
                        {"ints", Int64List{7, -7}},
                        {"unknown_in_list", Int64List{42}},
                        {"no_list", BytesList{}},
                        {"empty_floats", FloatList{}}};
  const auto got = dpipe::testing::collect(examples_of({path}));
  REQUIRE(got.size() == 4);
  CHECK(got[0] == first);
  CHECK(got[1].empty());
  CHECK(got[2] == id_map(-5));
  CHECK(got[3] == id_map(99));
  CHECK(std::get<FloatList>(got[0].at("floats"))[2] == 1e30F);
}

TEST_CASE("load_from_tfrecord runs the standard battery", "[io][tfrecord]") {
  TempDir dir;
  std::vector<TFExample> expected;
  std::vector<std::string> paths;
  for (int file = 0; file < 3; ++file) {
    std::vector<std::string> records;
    for (int record = 0; record < 5; ++record) {
      const int id = file * 10 + record;
      records.push_back(example({{"id", int64_feature({id}, record % 2 == 0)},
                                 {"text", bytes_feature({std::string(static_cast<std::size_t>(id) * 4000, 't')})}}));
      expected.push_back(
          {{"id", Int64List{id}}, {"text", BytesList{std::string(static_cast<std::size_t>(id) * 4000, 't')}}});
    }
    paths.push_back(dir.write("f" + std::to_string(file) + ".tfrecord", frames(records)));
  }
  dpipe::testing::check_battery([&] { return examples_of(paths); }, expected, std::nullopt);
}

namespace {

/// Files with one kind of bad record each: "alpha" at byte 0, the bad record at byte 21.
struct BadFiles {
  TempDir dir;
  std::string good = dir.write("good.tfrecord", frames({"g1", "g2"}));
  std::string flipped_data = [this] {
    std::string bytes = frames({"alpha", "bravo", "charlie"});
    bytes[21 + 12 + 2] = 'A';  // "brAvo"
    return dir.write("flipped_data.tfrecord", bytes);
  }();
  std::string flipped_length = [this] {
    std::string bytes = frames({"alpha", "bravo", "charlie"});
    bytes[21] = static_cast<char>(bytes[21] ^ 0x40);  // the length says 69
    return dir.write("flipped_length.tfrecord", bytes);
  }();
  std::string truncated_data = dir.write("truncated_data.tfrecord", frames({"alpha", "bravo"}).substr(0, 39));
  std::string truncated_header = dir.write("truncated_header.tfrecord", frames({"alpha", "bravo"}).substr(0, 28));
  std::string oversized = dir.write("oversized.tfrecord", frames({"alpha", std::string(100, 'x'), "charlie"}));
};

}  // namespace

TEST_CASE("tfrecord_records raises DataError naming the file and the record", "[io][tfrecord]") {
  BadFiles files;
  const auto message = [](const std::string& node, const std::string& path, const std::string& rest) {
    return node + "#[0-9]+: '" + path + "' byte offset " + rest;
  };
  CHECK_THAT(data_error_of(records_of({files.flipped_data})),
             Catch::Matches(message("tfrecord_records", files.flipped_data,
                                    "21: record 2: the data's CRC does not match \\(stored 0x7a8b9cec, "
                                    "computed 0xd0a45b75\\)")));
  CHECK_THAT(data_error_of(records_of({files.flipped_length})),
             Catch::Matches(message("tfrecord_records", files.flipped_length,
                                    "21: record 2: the length's CRC does not match \\(stored 0x3e04b2ea, "
                                    "computed 0xb068e6eb\\)")));
  CHECK_THAT(data_error_of(records_of({files.truncated_data})),
             Catch::Matches(message("tfrecord_records", files.truncated_data,
                                    "21: record 2: the file ends after 18 of the record's 21 bytes")));
  CHECK_THAT(data_error_of(records_of({files.truncated_header})),
             Catch::Matches(message("tfrecord_records", files.truncated_header,
                                    "21: record 2: the file ends inside the record's header \\(7 of 12 bytes\\)")));
  CHECK_THAT(data_error_of(records_of({files.oversized}, {.max_record_bytes = 99})),
             Catch::Matches(message("tfrecord_records", files.oversized,
                                    "21: record 2: the length field says 100 bytes, more than max_record_bytes "
                                    "\\(99\\)")));
  SECTION("without verify_crc a flipped data byte passes and a flipped length reads too far") {
    CHECK(dpipe::testing::collect(records_of({files.flipped_data}, {.verify_crc = false})) ==
          std::vector<std::string>{"alpha", "brAvo", "charlie"});
    CHECK_THAT(data_error_of(records_of({files.flipped_length}, {.verify_crc = false})),
               Catch::Matches(message("tfrecord_records", files.flipped_length,
                                      "21: record 2: the file ends after 44 of the record's 85 bytes")));
  }
  SECTION("the error's accessors") {
    try {
      (void)dpipe::testing::collect(records_of({files.flipped_data}));
      FAIL("no DataError");
    } catch (const DataError& error) {
      CHECK(error.path() == files.flipped_data);
      CHECK(error.byte_offset() == 21);
      CHECK_FALSE(error.line().has_value());
    }
  }
}

TEST_CASE("load_from_tfrecord raises DataError for a record that is not an Example", "[io][tfrecord]") {
  TempDir dir;
  const auto reason_of = [&](const std::string& record) {
    const std::string path = dir.write("bad.tfrecord", frames({id_example(1), record}));
    const std::string what = data_error_of(examples_of({path}));
    const std::string prefix = "' byte offset 31: record 2: not a tf.train.Example: ";
    const auto at = what.find(prefix);
    CHECK_THAT(what, Catch::StartsWith("load_from_tfrecord#") && Catch::Contains(path + prefix));
    return at == std::string::npos ? what : what.substr(at + prefix.size());
  };
  CHECK(reason_of("\x0a\x05\x0a\x03") == "field 1 of the Example is 5 bytes long, but only 2 are left");
  CHECK(reason_of("\x08\x80") == "a varint runs past the end of the Example");
  CHECK(reason_of("\x0e") == "field 1 of the Example has wire type 6, which does not exist");
  CHECK(reason_of(std::string("\x02\x00", 2)) == "the Example has a field number 0");
  CHECK(reason_of(std::string(11, '\xff') + "\x01") == "a varint in the Example is longer than 10 bytes");
  CHECK(reason_of(tag(4, 3) + tag(1, 0) + varint(1)) == "group 4 of the Example has no end");
  CHECK(reason_of(tag(4, 3) + tag(5, 4)) == "group 4 of the Example ends with field 5");
  CHECK(reason_of(tag(4, 4)) == "the Example ends group 4, which it did not start");
  CHECK(reason_of(example({{"f", delimited(2, delimited(1, "abc"))}})) ==
        "the packed values of a FloatList are 3 bytes, not a multiple of 4");
  CHECK(reason_of(example({{"f", delimited(3, delimited(1, "\x80"))}})) ==
        "a varint runs past the end of the Int64List");
  CHECK(reason_of(example({{"f", delimited(1, tag(1, 2) + varint(9) + "abc")}})) ==
        "field 1 of the BytesList is 9 bytes long, but only 3 are left");
  CHECK(reason_of(delimited(1, delimited(1, tag(1, 2) + varint(3)))) ==
        "field 1 of the Features entry is 3 bytes long, but only 0 are left");
}

TEST_CASE("tfrecord readers skip bad records and the rest of files whose framing broke", "[io][tfrecord]") {
  BadFiles files;
  dpipe::testing::LogCapture log;
  const std::vector<std::string> paths{files.flipped_data,   files.good, files.flipped_length,
                                       files.truncated_data, files.good, files.truncated_header,
                                       files.oversized};
  const auto pipe = records_of(paths, {.max_record_bytes = 99, .on_error = dpipe::OnError::skip()});
  dpipe::graph::enable_statistics(pipe.ptr());
  // A bad data CRC loses only its record; a broken framing loses the rest of the file.
  CHECK(dpipe::testing::collect(pipe) ==
        std::vector<std::string>{"alpha", "charlie", "g1", "g2", "alpha", "alpha", "g1", "g2", "alpha", "alpha"});
  const auto rows = dpipe::graph::statistics(pipe.ptr());
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].label.starts_with("tfrecord_records#"));
  CHECK(rows[0].skipped == 5);
  const auto messages = log.messages();
  REQUIRE(messages.size() == 5);
  CHECK_THAT(messages[0], Catch::Matches("tfrecord_records#[0-9]+: '" + files.flipped_data +
                                         "' byte offset 21: record 2: the data's CRC does not match .*; skipped "
                                         "\\(1 in this epoch\\)"));
  CHECK_THAT(messages[4], Catch::Matches("tfrecord_records#[0-9]+: '" + files.oversized +
                                         "' byte offset 21: record 2: the length field says 100 bytes.*; skipped "
                                         "\\(5 in this epoch\\)"));

  SECTION("load_from_tfrecord: a malformed Example loses only its record") {
    TempDir dir;
    const std::string path =
        dir.write("mixed.tfrecord", frames({id_example(1), "\x0e", id_example(2), "\x08\x80", id_example(3)}));
    const auto examples = examples_of({path}, {.on_error = dpipe::OnError::skip()});
    CHECK(dpipe::testing::collect(examples) == std::vector<TFExample>{id_map(1), id_map(2), id_map(3)});
    CHECK(dynamic_cast<const dpipe::io::TFRecordReader<TFExample>&>(examples.node()).skipped() == 2);
  }
}

TEST_CASE("tfrecord readers restore inside a file without reading the files before it", "[io][tfrecord]") {
  TempDir dir;
  const std::string a = dir.write("a.tfrecord", frames({id_example(1), id_example(2)}));
  const std::string b = dir.write("b.tfrecord", frames({id_example(3), id_example(4), id_example(5)}));
  const auto make = [&] { return examples_of({a, b}); };
  const auto pipe = make();
  (void)dpipe::testing::take(pipe, 3);  // a and the first record of b
  const auto blob = dpipe::graph::save_state(pipe);
  fs::remove(a);  // nothing reads it again
  const auto restored = make();
  dpipe::graph::load_state(restored, blob);
  CHECK(dpipe::testing::collect(restored) == std::vector<TFExample>{id_map(4), id_map(5)});

  SECTION("a record number after a restore counts from the file's start") {
    std::string bytes = frames({id_example(3), id_example(4), id_example(5)});
    bytes[bytes.size() - 5] = static_cast<char>(bytes[bytes.size() - 5] ^ 1);
    (void)dir.write("b.tfrecord", bytes);
    const auto again = make();
    dpipe::graph::load_state(again, blob);
    CHECK_THAT(data_error_of(again), Catch::Contains("' byte offset 62: record 3: the data's CRC does not match"));
  }
  SECTION("a file that is shorter than the checkpoint's offset is refused") {
    (void)dir.write("b.tfrecord", "x");
    try {
      dpipe::graph::load_state(make(), blob);
      FAIL("no StateError");
    } catch (const dpipe::StateError& error) {
      CHECK_THAT(error.what(), Catch::Matches("load_from_tfrecord#[0-9]+: cannot continue the file the checkpoint was "
                                              "reading: load_from_tfrecord#[0-9]+: '" +
                                              b +
                                              "' byte offset 31: the file has only 1 bytes \\(it changed since the "
                                              "checkpoint\\)"));
    }
  }
}

TEST_CASE("tfrecord readers read gzip-compressed files through decompress", "[io][tfrecord]") {
  TempDir dir;
  std::vector<std::string> records;
  std::vector<TFExample> expected;
  for (int id = 0; id < 40; ++id) {
    records.push_back(example({{"id", int64_feature({id}, true)}, {"pad", bytes_feature({std::string(5000, 'p')})}}));
    expected.push_back({{"id", Int64List{id}}, {"pad", BytesList{std::string(5000, 'p')}}});
  }
  const std::string path = dir / "records.tfrecord.gz";
  dpipe::testing::write_compressed(path, "gzip", frames(records));
  const auto make = [&] {
    return dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files() | dpipe::io::decompress() |
           dpipe::io::load_from_tfrecord();
  };
  dpipe::testing::check_battery(make, expected, std::nullopt);
  const auto raw = dpipe::iter::from(std::vector<std::string>{path}) | dpipe::io::open_files() |
                   dpipe::io::decompress() | dpipe::io::tfrecord_records();
  CHECK(dpipe::testing::collect(raw) == records);
}

TEST_CASE("load_from_tfrecord reads a directory of Examples", "[io][tfrecord]") {
  TempDir dir;
  (void)dir.write(
      "train-0.tfrecord",
      frames({example({{"label", int64_feature({1}, true)}, {"pixels", float_feature({0.5F, 0.25F}, true)}})}));
  std::vector<std::int64_t> labels;
  std::size_t pixel_count = 0;
  // [load_examples]
  auto examples = dpipe::io::list_files(dir.str(), {"*.tfrecord"})  // paths, sorted
                  | dpipe::io::open_files()                         // add decompress() for .gz files
                  | dpipe::io::load_from_tfrecord();                // io::TFExample: name -> Feature
  for (const dpipe::io::TFExample& example : examples) {
    const auto& label = std::get<dpipe::io::Int64List>(example.at("label"));
    const auto& pixels = std::get<dpipe::io::FloatList>(example.at("pixels"));
    labels.push_back(label.at(0));
    pixel_count += pixels.size();
  }
  // [load_examples]
  CHECK(labels == std::vector<std::int64_t>{1});
  CHECK(pixel_count == 2);
}

TEST_CASE("Worker processes and threads read sharded TFRecord files and restore mid-epoch",
          "[io][tfrecord][concurrency]") {
  TempDir dir;
  std::vector<TFExample> examples;
  std::vector<std::string> records;
  for (int file = 0; file < 6; ++file) {
    std::vector<std::string> in_file;
    for (int record = 0; record < 5; ++record) {
      const int id = file * 10 + record;
      in_file.push_back(example(
          {{"id", int64_feature({id}, true)}, {"weights", float_feature({0.5F * static_cast<float>(id)}, false)}}));
      examples.push_back({{"id", Int64List{id}}, {"weights", FloatList{0.5F * static_cast<float>(id)}}});
    }
    records.insert(records.end(), in_file.begin(), in_file.end());
    (void)dir.write("part-" + std::to_string(file) + ".tfrecord", frames(in_file));
  }
  const auto files = [&] {
    return dpipe::io::list_files(dir.str(), {"*.tfrecord"}) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() |
           dpipe::io::open_files();
  };
  SECTION("tfrecord_records") {
    dpipe::testing::check_workers([&] { return files() | dpipe::io::tfrecord_records(); }, records);
  }
  SECTION("load_from_tfrecord") {
    dpipe::testing::check_workers([&] { return files() | dpipe::io::load_from_tfrecord(); }, examples);
  }
}

// Reads the formats training data comes in: text lines in blocks, CSV with a header, JSON lines,
// and TFRecord files of tf.train.Example records. The example writes each file itself (the TFRecord framing and the
// Example's protobuf bytes by hand, as TensorFlow writes them).

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>
#include <variant>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "tfrecord_writing.hpp"

namespace {

std::string varint(std::uint64_t value) {
  std::string out;
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>((value & 0x7fU) | 0x80U));
  out.push_back(static_cast<char>(value));
  return out;
}

/// A length-delimited protobuf field.
std::string field(std::uint64_t number, const std::string& bytes) {
  return varint((number << 3) | 2) + varint(bytes.size()) + bytes;
}

/// A tf.train.Example whose feature `name` is the Int64List {value}: Example.features (1) ->
/// Features.feature (1, a map entry: key 1, value 2) -> Feature.int64_list (3) -> packed values (1).
std::string example_of(const std::string& name, std::uint64_t value) {
  const std::string feature = field(3, field(1, varint(value)));
  return field(1, field(1, field(1, name) + field(2, feature)));
}

}  // namespace

int main() {
  const auto dir = std::filesystem::temp_directory_path() / ("dpipe-formats-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "train.csv") << "text,label\n\"hello, world\",1\n\"two\nlines\",0\nplain,2\n";
  std::ofstream(dir / "train.jsonl") << R"({"id": 1, "text": "a"})"
                                     << "\n"
                                     << R"({"id": 2, "text": "b", "tags": ["x"]})"
                                     << "\n";
  std::ofstream(dir / "train.tfrecord", std::ios::binary)
      << dpipe_examples::framed(example_of("id", 7)) << dpipe_examples::framed(example_of("id", 8));
  std::ofstream(dir / "notes.txt") << "one\ntwo\nthree\nfour\nfive\n";

  // [lines]
  auto blocks = dpipe::io::list_files(dir.string(), {"*.txt"}) | dpipe::io::open_files() |
                dpipe::io::readlines({}, dpipe::io::in_blocks(2));  // io::LineBlocks of up to 2 lines
  std::string starts;
  std::size_t line_bytes = 0;
  for (const auto& block : blocks) {
    starts += " " + std::to_string(block.first_line());                   // the number of its first line
    for (const std::string_view line : block) line_bytes += line.size();  // views into the block
  }
  // [lines]

  // [csv]
  auto records = dpipe::io::list_files(dir.string(), {"*.csv"}) | dpipe::io::open_files() |
                 dpipe::io::parse_csv_as_dict();  // one io::CsvRecord per row, keyed by the header
  int label_sum = 0;
  for (const auto& record : records) label_sum += std::stoi(record["label"]);
  // [csv]
  // [jsonl]
  auto values = dpipe::io::list_files(dir.string(), {"*.jsonl"}) | dpipe::io::open_files() |
                dpipe::io::parse_jsonl();  // one io::Json per line, parsed by simdjson
  std::string texts;
  for (const auto& value : values) texts += value["text"].as_string() + std::to_string(value["id"].as_int());
  // [jsonl]
  // [jsonl_blocks]
  auto json_blocks = dpipe::io::list_files(dir.string(), {"*.jsonl"}) | dpipe::io::open_files() |
                     dpipe::io::parse_jsonl({}, dpipe::io::in_blocks(1024));  // io::JsonBlocks, read in place
  std::string in_place;
  dpipe::io::Json last;
  for (const dpipe::io::JsonBlock& block : json_blocks) {
    for (std::size_t i = 0; i < block.size(); ++i) {
      const dpipe::io::JsonView record = block[i];  // a view: valid while its block lives
      in_place += std::string(record["text"].as_string()) + "@" + std::to_string(block.line(i)) + " ";
      last = record.to_json();  // an owning io::Json, on demand
    }
  }
  // [jsonl_blocks]
  // [tfrecord]
  auto examples = dpipe::io::list_files(dir.string(), {"*.tfrecord"}) | dpipe::io::open_files() |
                  dpipe::io::load_from_tfrecord();  // both CRC32Cs checked; io::TFExample maps
  std::string ids;
  for (const auto& example : examples) ids += std::to_string(std::get<dpipe::io::Int64List>(example.at("id")).at(0));
  // [tfrecord]
  std::printf(
      "lines: %zu bytes, blocks from lines%s\ncsv: label sum %d\njsonl: %s\njsonl blocks: %s%s\ntfrecord: ids %s\n",
      line_bytes, starts.c_str(), label_sum, texts.c_str(), in_place.c_str(),
      last["tags"][std::size_t{0}].as_string().c_str(), ids.c_str());
  std::filesystem::remove_all(dir);
  return 0;
}

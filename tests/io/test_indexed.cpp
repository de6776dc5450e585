// Indexed files: record indexes (index_file) and indexed_records. For each format the records read
// through the index equal the sequential reader's, in order and in a shuffled order; indexes are
// reused while fresh, rebuilt or refused when stale, rebuilt or refused when corrupt, kept in a
// cache directory; files that cannot be indexed and bad records are DataErrors with exact
// messages; clones and worker processes read on their own descriptors; a global order's hints
// make batched reads (io_uring, or preads), which serve the same records and fail the same way.

#include <algorithm>
#include <cstdint>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "io/batch_read.hpp"
#include "support/archive_writer.hpp"
#include "support/battery.hpp"
#include "support/data_error.hpp"
#include "support/io_workers.hpp"
#include "support/log_capture.hpp"
#include "support/temp_dir.hpp"
#include "support/tfrecord_writer.hpp"

namespace {

namespace fs = std::filesystem;
using dpipe::io::IndexedFormat;
using dpipe::io::IndexOptions;
using dpipe::io::StaleIndex;
using dpipe::testing::collect;
using dpipe::testing::data_error_of;
using dpipe::testing::TempDir;

/// The records of `paths` read one after the other by `reader` (an adaptor on opened files).
template <class Reader>
auto sequential(const std::vector<std::string>& paths, Reader reader) {
  return collect(dpipe::iter::from(paths) | dpipe::io::open_files() | reader);
}

/// Checks that `records` holds `expected`: its size, each key in order, every key in a shuffled
/// order (a fixed Fisher-Yates permutation), and to_iter().
template <class V>
void check_records(const dpipe::MapPipe<std::size_t, V>& records, const std::vector<V>& expected) {
  REQUIRE(records.size() == expected.size());
  for (std::size_t key = 0; key < expected.size(); ++key) {
    INFO("key " << key);
    CHECK(records.get(key) == expected[key]);
  }
  std::vector<std::size_t> order(expected.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  std::vector<V> shuffled;
  std::vector<V> permuted;
  for (const std::size_t key : order) {
    shuffled.push_back(records.get(key));
    permuted.push_back(expected[key]);
  }
  CHECK(shuffled == permuted);
  CHECK(collect(records.to_iter()) == expected);
}

/// The message of `error` after the node's label ("indexed_records#7: rest" gives "rest").
std::string after_label(const std::string& message) { return message.substr(message.find(": ") + 2); }

std::vector<std::string> numbered(const std::string& stem, int count, std::size_t size) {
  std::vector<std::string> records;
  for (int i = 0; i < count; ++i) {
    std::string record = stem + std::to_string(i) + ":";
    record.resize(size + static_cast<std::size_t>(i % 7), static_cast<char>('a' + i % 26));
    records.push_back(record);
  }
  return records;
}

/// Three TFRecord files: small records, an empty file, records larger than the read-ahead.
struct TFRecordFiles {
  TempDir dir;
  std::vector<std::string> paths{
      dir.write("a.tfrecord", dpipe::testing::frames(numbered("a", 300, 100))), dir.write("empty.tfrecord", ""),
      dir.write("b.tfrecord", dpipe::testing::frames({std::string(200000, 'L'), "x", "", std::string(70000, 'm')}))};
};

std::int64_t mtime_ns(const std::string& path) {
  struct stat status {};
  REQUIRE(::stat(path.c_str(), &status) == 0);
  return static_cast<std::int64_t>(status.st_mtim.tv_sec) * 1'000'000'000 + status.st_mtim.tv_nsec;
}

/// Batched reads with io_uring (true) or with preads while it lives; io_uring again after.
class RingSetting {
 public:
  explicit RingSetting(bool ring) { dpipe::io::detail::set_io_uring_enabled(ring); }
  RingSetting(const RingSetting&) = delete;
  RingSetting& operator=(const RingSetting&) = delete;
  ~RingSetting() { dpipe::io::detail::set_io_uring_enabled(true); }
};

/// The keys a global order over `size` records reads, in its order for `seed` (batches of 64).
std::vector<std::size_t> global_keys(std::size_t size, std::uint64_t seed) {
  std::vector<std::size_t> keys(size);
  std::iota(keys.begin(), keys.end(), std::size_t{0});
  dpipe::DataLoader2<std::vector<std::size_t>> loader(dpipe::global_order(keys).batch(64));
  loader.seed(seed);
  std::vector<std::size_t> order;
  for (const auto& batch : loader) order.insert(order.end(), batch.begin(), batch.end());
  return order;
}

/// The records of a loader's next epoch of batches, one after the other.
std::vector<std::string> flat_epoch(dpipe::DataLoader2<std::vector<std::string>>& loader) {
  std::vector<std::string> records;
  for (auto& batch : loader) std::move(batch.begin(), batch.end(), std::back_inserter(records));
  return records;
}

/// Overwrites one byte of `path` at `offset`.
void poke(const std::string& path, std::uint64_t offset, char byte) {
  std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
  file.seekp(static_cast<std::streamoff>(offset));
  file << byte;
}

/// Sets the modification time of `path` `seconds` later than it is.
void touch_later(const std::string& path, int seconds) {
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(seconds));
}

}  // namespace

TEST_CASE("indexed_records: TFRecord records and Examples equal the sequential readers'", "[io][indexed]") {
  TFRecordFiles files;
  const auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths);
  check_records(records, sequential(files.paths, dpipe::io::tfrecord_records()));
  CHECK(records.node().settings() == dpipe::NodeSettings{{"format", "tfrecord"}, {"files", "3"}, {"records", "304"}});

  TempDir dir;
  std::vector<std::string> examples;
  for (int id = 0; id < 50; ++id)
    examples.push_back(dpipe::testing::example(
        {{"id", dpipe::testing::int64_feature({id, -id}, id % 2 == 0)},
         {"name", dpipe::testing::bytes_feature({"n" + std::to_string(id)})},
         {"weights", dpipe::testing::float_feature({0.5F * static_cast<float>(id)}, id % 3 == 0)}}));
  const std::vector<std::string> paths{dir.write("e.tfrecord", dpipe::testing::frames(examples))};
  check_records(dpipe::io::indexed_records<IndexedFormat::kTFExample>(paths),
                sequential(paths, dpipe::io::load_from_tfrecord()));
}

TEST_CASE("indexed_records: lines equal readlines' with its options", "[io][indexed]") {
  TempDir dir;
  std::string long_lines;
  for (int i = 0; i < 3000; ++i)
    long_lines += "line " + std::to_string(i) + std::string(static_cast<std::size_t>(i % 50), '.') + "\n";
  const std::vector<std::string> paths{dir.write("a.txt", "header\none\ntwo\n\nthree\n"),
                                       dir.write("b.txt", "header\r\nfour\r\n\r\nfive"), dir.write("c.txt", ""),
                                       dir.write("d.txt", "\n\n"), dir.write("e.txt", long_lines)};
  for (const std::size_t skip : {std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
    for (const bool strip : {true, false}) {
      INFO("skip_lines " << skip << ", strip_newline " << strip);
      const dpipe::io::ReadLinesOptions options{.skip_lines = skip, .strip_newline = strip};
      check_records(dpipe::io::indexed_records<IndexedFormat::kLines>(paths, {}, options),
                    sequential(paths, dpipe::io::readlines(options, dpipe::io::lines_only)));
    }
  }
}

TEST_CASE("indexed_records: JSON lines equal parse_jsonl's with blank lines passed over", "[io][indexed]") {
  TempDir dir;
  const std::vector<std::string> paths{
      dir.write("a.jsonl", "{\"id\": 1, \"text\": \"one\"}\n\n  \t\n[1, 2.5, null]\r\n\"s\"\r\n \r\n{\"id\": 2}"),
      dir.write("blank.jsonl", "\n \n"), dir.write("b.jsonl", "true\n{\"nested\": {\"a\": [1, {\"b\": false}]}}\n")};
  const auto values = dpipe::io::indexed_records<IndexedFormat::kJsonLines>(paths);
  check_records(values, sequential(paths, dpipe::io::parse_jsonl()));
  CHECK(values.size() == 6);
  // The lines index serves both: the JSON reader reuses the index the lines reader built.
  const auto builds = dpipe::io::detail::index_builds();
  CHECK(dpipe::io::indexed_records<IndexedFormat::kLines>(paths).size() == 11);
  CHECK(dpipe::io::detail::index_builds() == builds);

  const std::string bad = dir.write("bad.jsonl", "{\"id\": 1}\n{\"id\": 1x}\n");
  const auto broken = dpipe::io::indexed_records<IndexedFormat::kJsonLines>({bad});
  CHECK(after_label(data_error_of([&] { (void)broken.get(1); })) ==
        after_label(
            data_error_of(dpipe::iter::from(std::vector{bad}) | dpipe::io::open_files() | dpipe::io::parse_jsonl())));
}

TEST_CASE("indexed_records: CSV rows equal parse_csv's", "[io][indexed]") {
  TempDir dir;
  const std::vector<std::string> paths{
      dir.write("a.csv",
                "id,text\n1,\"quoted, with comma\"\n2,\"doubled \"\"quote\"\"\"\n3,in\"side\n\n"
                "4,\"closed\"after\r\n5,\"\"\r6,a,\n\"\",\"x\"\"\"\n7,last"),
      dir.write("empty.csv", ""), dir.write("b.csv", "only\n")};
  for (const std::size_t skip : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
    INFO("skip_lines " << skip);
    const dpipe::io::CsvOptions options{.skip_lines = skip};
    check_records(dpipe::io::indexed_records<IndexedFormat::kCsv>(paths, {}, options),
                  sequential(paths, dpipe::io::parse_csv(options)));
  }
  const std::vector<std::string> semicolons{dir.write("s.csv", "a;'b;c';'d''e'\nx,y;'z'\n")};
  const dpipe::io::CsvOptions dialect{.delimiter = ';', .quotechar = '\''};
  check_records(dpipe::io::indexed_records<IndexedFormat::kCsv>(semicolons, {}, dialect),
                sequential(semicolons, dpipe::io::parse_csv(dialect)));
  // Another dialect finds other row ends: the index is stale, and built again.
  const auto builds = dpipe::io::detail::index_builds();
  (void)dpipe::io::indexed_records<IndexedFormat::kCsv>(semicolons);
  CHECK(dpipe::io::detail::index_builds() == builds + 1);

  const auto limited = dpipe::io::indexed_records<IndexedFormat::kCsv>(paths, {}, {.max_row_bytes = 20});
  const std::string too_long = data_error_of([&] { (void)limited.get(1); });
  CHECK_THAT(too_long, Catch::Matches("indexed_records#[0-9]+: '" + paths[0] +
                                      "' line 2 byte offset 8: the row is longer than max_row_bytes \\(20\\)"));
  CHECK(after_label(too_long) == after_label(data_error_of(dpipe::iter::from(paths) | dpipe::io::open_files() |
                                                           dpipe::io::parse_csv({.max_row_bytes = 20}))));
}

TEST_CASE("indexed_records: a CSV file with a multi-line row is refused", "[io][indexed]") {
  TempDir dir;
  const std::string path = dir.write("multi.csv", "h1,h2\n1,one\n2,\"two\nlines\"\n");
  CHECK_THAT(data_error_of([&] { (void)dpipe::io::indexed_records<IndexedFormat::kCsv>({path}); }),
             Catch::Matches("indexed_records#[0-9]+: '" + path +
                            "' line 3 byte offset 12: a quoted field of this row holds a line end: a CSV file with "
                            "multi-line rows cannot be indexed"));
  const std::string unclosed = dir.write("unclosed.csv", "h\n\"never");
  CHECK_THAT(data_error_of([&] { (void)dpipe::io::indexed_records<IndexedFormat::kCsv>({unclosed}); }),
             Catch::Matches("indexed_records#[0-9]+: '" + unclosed +
                            "' line 2 byte offset 2: a quoted field of this row never ends \\(the file ends inside "
                            "its quotes\\)"));
}

TEST_CASE("indexed_records: tar members and WebDataset samples equal load_from_tar's and webdataset's",
          "[io][indexed]") {
  TempDir dir;
  const std::string long_name = std::string(120, 'n') + "/" + std::string(80, 'm') + ".bin";
  const std::vector<dpipe::testing::ArchiveEntry> entries{{"s/", ""},
                                                          {"s/000.jpg", std::string(100000, 'j')},
                                                          {"s/000.cls", "0"},
                                                          {"s/000", "no suffix"},
                                                          {"s/001.jpg", "jpeg 1"},
                                                          {"s/001.seg.png", ""},
                                                          {"s/001.jpg", "jpeg 1 again"},
                                                          {"s/002.cls", "2"},
                                                          {long_name, "long"}};
  std::vector<std::string> paths;
  for (const std::string format : {"ustar", "gnutar", "pax"}) {
    paths.push_back(dir / (format + ".tar"));
    dpipe::testing::write_archive(paths.back(), format, "none", entries);
  }
  check_records(dpipe::io::indexed_records<IndexedFormat::kTar>(paths), sequential(paths, dpipe::io::load_from_tar()));
  check_records(dpipe::io::indexed_records<IndexedFormat::kWebDataset>(paths),
                collect(dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::load_from_tar() |
                        dpipe::io::webdataset()));

  const auto limited = dpipe::io::indexed_records<IndexedFormat::kTar>(paths, {}, {.max_member_bytes = 1000});
  CHECK_THAT(data_error_of([&] { (void)limited.get(0); }),
             Catch::Matches("indexed_records#[0-9]+: '" + paths[0] +
                            "' member 's/000.jpg' byte offset 1024: the member has 100000 bytes, more than "
                            "max_member_bytes \\(1000\\)"));
}

TEST_CASE("indexed_records: a compressed tar is refused", "[io][indexed]") {
  TempDir dir;
  const std::string path = dir / "shard.tar.gz";
  dpipe::testing::write_archive(path, "ustar", "gzip", {{"a.txt", "a"}});
  CHECK_THAT(data_error_of([&] { (void)dpipe::io::indexed_records<IndexedFormat::kTar>({path}); }),
             Catch::Matches("indexed_records#[0-9]+: '" + path +
                            "' byte offset 0: the archive is compressed \\(gzip\\): a compressed tar cannot be "
                            "indexed; decompress it first, or read it with load_from_tar"));
  const std::string text = dir.write("not.tar", std::string(1024, 'x'));
  CHECK_THAT(data_error_of([&] { (void)dpipe::io::indexed_records<IndexedFormat::kTar>({text}); }),
             Catch::EndsWith("byte offset 0: the tar header's checksum does not match: the file is not a tar "
                             "archive, or it is damaged"));
}

TEST_CASE("index_file: a fresh index is reused and not rebuilt", "[io][indexed]") {
  TFRecordFiles files;
  const auto builds = dpipe::io::detail::index_builds();
  const auto first = dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths);
  CHECK(dpipe::io::detail::index_builds() == builds + 3);
  const std::string index = dpipe::io::index_path(files.paths[0]);
  CHECK(index == files.paths[0] + ".dpipe-idx");
  REQUIRE(fs::exists(index));
  const auto stored = mtime_ns(index);

  const auto again = dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths);
  CHECK(dpipe::io::detail::index_builds() == builds + 3);
  CHECK(mtime_ns(index) == stored);
  const auto& node = dynamic_cast<const dpipe::io::IndexedRecords<IndexedFormat::kTFRecord>&>(again.node());
  CHECK_FALSE(node.index(0).built);
  CHECK(node.index(0).spans.size() == 300);
  CHECK(node.index(0).spans[1] == dpipe::io::RecordSpan{116, 117});          // 101 bytes framed
  CHECK(node.locate(301) == dpipe::io::RecordLocation{2, 1, {200016, 17}});  // b.tfrecord's second record
  CHECK_THROWS_WITH(node.locate(304),
                    Catch::Matches("indexed_records#[0-9]+: index 304 is out of range for 304 records"));
  check_records(again, sequential(files.paths, dpipe::io::tfrecord_records()));

  // index_file itself: the same spans, loaded.
  const auto loaded = dpipe::io::index_file(files.paths[0], {.kind = dpipe::io::IndexKind::kTFRecord});
  CHECK_FALSE(loaded.built);
  CHECK(loaded.spans == node.index(0).spans);
  CHECK(loaded.file_size == fs::file_size(files.paths[0]));
  CHECK(loaded.file_mtime_ns == mtime_ns(files.paths[0]));
}

TEST_CASE("index_file: a stale index is rebuilt by default and refused with kRefuse", "[io][indexed]") {
  TempDir dir;
  const std::string path = dir.write("a.tfrecord", dpipe::testing::frames({"one", "two"}));
  (void)dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path});
  const std::string index = path + ".dpipe-idx";
  const auto indexed_size = fs::file_size(path);
  const auto indexed_mtime = mtime_ns(path);

  std::ofstream(path, std::ios::binary | std::ios::app) << dpipe::testing::frame("three");
  touch_later(path, 1);  // a later time whatever the clock's tick
  const auto expected_refusal = [&] {
    return fmt::format(
        "indexed_records#[0-9]+: '{}': its index '{}' is stale: the file has {} bytes and modification time {} ns, "
        "the index was built when it had {} bytes and time {} ns \\(StaleIndex::kRefuse; delete the index to build "
        "it again\\)",
        path, index, fs::file_size(path), mtime_ns(path), indexed_size, indexed_mtime);
  };
  const IndexOptions refuse{.on_stale = StaleIndex::kRefuse};
  CHECK_THAT(data_error_of([&] { (void)dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}, refuse); }),
             Catch::Matches(expected_refusal()));

  auto builds = dpipe::io::detail::index_builds();
  const auto rebuilt = dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path});
  CHECK(dpipe::io::detail::index_builds() == builds + 1);
  CHECK(collect(rebuilt.to_iter()) == std::vector<std::string>{"one", "two", "three"});
  // Rebuilt and stored: kRefuse accepts it now.
  CHECK(dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}, refuse).size() == 3);

  // The same size, a new modification time.
  const auto before_touch = mtime_ns(path);
  touch_later(path, 5);
  CHECK_THAT(data_error_of([&] { (void)dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}, refuse); }),
             Catch::Contains(fmt::format("the file has {} bytes and modification time {} ns, the index was built "
                                         "when it had {} bytes and time {} ns",
                                         fs::file_size(path), mtime_ns(path), fs::file_size(path), before_touch)));
  builds = dpipe::io::detail::index_builds();
  CHECK(dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}).size() == 3);
  CHECK(dpipe::io::detail::index_builds() == builds + 1);

  // An index of another kind is stale too.
  CHECK_THAT(data_error_of([&] { (void)dpipe::io::indexed_records<IndexedFormat::kLines>({path}, refuse); }),
             Catch::Contains("is stale: it was built for TFRecord records, not lines"));
}

TEST_CASE("index_file: a corrupt index is rebuilt by default and refused with kRefuse", "[io][indexed]") {
  TempDir dir;
  const std::string path = dir.write("a.tfrecord", dpipe::testing::frames(numbered("r", 20, 10)));
  const std::string index = path + ".dpipe-idx";
  const IndexOptions refuse{.on_stale = StaleIndex::kRefuse};
  const auto intact = [&] {
    fs::remove(index);
    (void)dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path});
    std::ifstream in(index, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const auto damage = [&](const std::string& bytes, const std::string& problem) {
    INFO(problem);
    std::ofstream(index, std::ios::binary | std::ios::trunc) << bytes;
    CHECK_THAT(data_error_of([&] { (void)dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}, refuse); }),
               Catch::Matches(fmt::format("indexed_records#[0-9]+: '{}': its index '{}' is corrupt: {} "
                                          "\\(StaleIndex::kRefuse; delete the index to build it again\\)",
                                          path, index, problem)));
    dpipe::testing::LogCapture log;
    const auto builds = dpipe::io::detail::index_builds();
    CHECK(collect(dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}).to_iter()) == numbered("r", 20, 10));
    CHECK(dpipe::io::detail::index_builds() == builds + 1);
    REQUIRE(log.messages().size() == 1);
    CHECK_THAT(log.messages()[0], Catch::Contains("rebuilding its corrupt index"));
    // Rebuilt and stored again.
    CHECK(dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}, refuse).size() == 20);
  };
  std::string flipped = intact;
  flipped[flipped.size() - 100] = static_cast<char>(flipped[flipped.size() - 100] ^ 0x10);
  damage(flipped, "its records' CRC does not match");
  std::string header = intact;
  header[20] = static_cast<char>(header[20] ^ 1);
  damage(header, "its header's CRC does not match");
  damage(intact.substr(0, 50), "it is shorter than its header");
  damage(intact.substr(0, intact.size() - 16), "its size does not match what its header says it holds");
  damage(std::string(200, 'x'), "it does not start with the magic number of a dpipe index");
  std::string future = intact;
  future[8] = 9;
  damage(future, "it has format version 9; this dpipe reads version 1");
}

TEST_CASE("index_file: indexes kept in a cache directory", "[io][indexed]") {
  TempDir dir;
  const std::string a = dir.write("one/a.tfrecord", dpipe::testing::frames({"1", "2"}));
  const std::string b = dir.write("two/a.tfrecord", dpipe::testing::frames({"3"}));
  const IndexOptions cached{.cache_dir = dir / "cache/indexes"};
  const auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>({a, b}, cached);
  CHECK(collect(records.to_iter()) == std::vector<std::string>{"1", "2", "3"});
  CHECK_FALSE(fs::exists(a + ".dpipe-idx"));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(cached.cache_dir)) names.push_back(entry.path().filename());
  REQUIRE(names.size() == 2);  // one file name, two files: two indexes
  for (const auto& name : names) CHECK_THAT(name, Catch::Matches("[0-9a-f]{16}-a\\.tfrecord\\.dpipe-idx"));
  CHECK(fs::path(dpipe::io::index_path(a, cached)).parent_path() == fs::path(cached.cache_dir));
  CHECK(dpipe::io::index_path(a, cached) != dpipe::io::index_path(b, cached));

  const auto builds = dpipe::io::detail::index_builds();
  CHECK(dpipe::io::indexed_records<IndexedFormat::kTFRecord>({a, b}, cached).size() == 3);
  CHECK(dpipe::io::detail::index_builds() == builds);
}

TEST_CASE("indexed_records: bad records are DataErrors naming the file and the offset", "[io][indexed]") {
  TempDir dir;
  const std::string path = dir.write("a.tfrecord", dpipe::testing::frames({"first", "second", "third"}));
  const auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path});
  {
    std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
    file.seekp(21 + 12);
    file << 'S';  // the second record's data changes; the index still says where it is
  }
  const std::string sequential_error =
      data_error_of(dpipe::iter::from(std::vector{path}) | dpipe::io::open_files() | dpipe::io::tfrecord_records());
  CHECK_THAT(sequential_error, Catch::Contains("byte offset 21: record 2: the data's CRC does not match"));
  CHECK(after_label(data_error_of([&] { (void)records.get(1); })) == after_label(sequential_error));
  CHECK(records.get(0) == "first");
  CHECK(dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}, {}, {.verify_crc = false}).get(1) == "Second");

  fs::resize_file(path, fs::file_size(path) - 3);
  CHECK_THAT(data_error_of([&] { (void)records.get(2); }),
             Catch::Matches("indexed_records#[0-9]+: '" + path +
                            "' byte offset 43: record 3: the file ends after 18 of the record's 21 bytes \\(it "
                            "changed since it was indexed\\)"));
  // Indexing the truncated file fails as reading it does.
  fs::remove(path + ".dpipe-idx");
  CHECK(after_label(data_error_of([&] { (void)dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}); })) ==
        "'" + path + "' byte offset 43: record 3: the file ends after 18 of the record's 21 bytes");

  CHECK_THROWS_WITH(records.get(3), Catch::Matches("indexed_records#[0-9]+: index 3 is out of range for 3 records"));
  CHECK_THROWS_WITH(
      dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}, {}, {.on_error = dpipe::OnError::skip()}),
      Catch::Contains("a map pipe cannot skip a record (OnError::skip)"));
  CHECK_THAT(data_error_of([&] { (void)dpipe::io::indexed_records<IndexedFormat::kLines>({dir / "missing.txt"}); }),
             Catch::Matches("indexed_records#[0-9]+: '" + (dir / "missing.txt") +
                            "': cannot open: No such file or directory"));
}

TEST_CASE("indexed_records: reads ahead only while reads go in order", "[io][indexed]") {
  TFRecordFiles files;
  const auto expected = sequential(files.paths, dpipe::io::tfrecord_records());
  for (const std::size_t read_ahead : {std::size_t{0}, std::size_t{1}, std::size_t{300}, std::size_t{64} << 10}) {
    INFO("read_ahead_bytes " << read_ahead);
    check_records(dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths, {.read_ahead_bytes = read_ahead}),
                  expected);
  }
}

TEST_CASE("indexed_records: clones and worker processes read on descriptors of their own",
          "[io][indexed][concurrency]") {
  TFRecordFiles files;
  const auto expected = sequential(files.paths, dpipe::io::tfrecord_records());
  const auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths);
  CHECK(records.get(5) == expected[5]);
  const auto copy =
      std::dynamic_pointer_cast<dpipe::MapDataPipe<std::size_t, std::string>>(records.node().clone_self());
  REQUIRE(copy);
  CHECK(copy->get(6) == expected[6]);
  CHECK(records.get(303) == expected[303]);
  CHECK(copy->get(303) == expected[303]);
  // An epoch in a global random order, shared out to two workers after the shuffle.
  dpipe::testing::check_workers(
      [&] {
        return dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths).shuffle() |
               dpipe::iter::sharding_filter();
      },
      expected);
}

TEST_CASE("indexed_records: the documentation's global shuffle over the records of many files", "[io][indexed]") {
  TempDir dir;
  std::vector<std::string> paths;
  for (int file = 0; file < 4; ++file)
    paths.push_back(dir.write("part-" + std::to_string(file) + ".tfrecord",
                              dpipe::testing::frames(numbered("f" + std::to_string(file) + "-", 25, 40))));
  const std::string cache = dir / "indexes";
  // [indexed]
  using dpipe::io::IndexedFormat;
  // A MapPipe<std::size_t, std::string>: key k is the k-th record across the files, read by pread.
  auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>(paths, {.cache_dir = cache});
  auto batches = records.shuffle()                 // every record of every file, in one random order
                 | dpipe::iter::sharding_filter()  // each worker reads its share of that order
                 | dpipe::iter::batch(8);
  dpipe::DataLoader2<std::vector<std::string>> loader(batches,
                                                      dpipe::MultiProcessingReadingService({.num_workers = 2}));
  loader.seed(0);
  std::size_t seen = 0;
  for (const auto& batch : loader) seen += batch.size();
  // [indexed]
  CHECK(records.size() == 100);
  CHECK(seen == 100);
}

TEST_CASE("indexed_records: a global order reads the records in its order / hinted and read in batches",
          "[io][indexed][global]") {
  TFRecordFiles files;
  const auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths);
  const auto order = global_keys(records.size(), 5);
  REQUIRE(order.size() == records.size());
  CHECK_FALSE(std::is_sorted(order.begin(), order.end()));
  std::vector<std::string> expected;  // each record read alone, by key
  for (const std::size_t key : order) expected.push_back(records.get(key));
  for (const bool ring : {true, false}) {
    INFO((ring ? "io_uring" : "preads"));
    const RingSetting setting(ring);
    const auto batched = dpipe::io::detail::batched_records();
    dpipe::DataLoader2<std::vector<std::string>> loader(dpipe::global_order(records).batch(64));
    loader.seed(5);
    CHECK(flat_epoch(loader) == expected);
    CHECK(dpipe::io::detail::batched_records() - batched == records.size());  // each one hinted, then batched
    // in_order(): a step is one position, each hinted and read in a batch of one.
    dpipe::DataLoader2<std::string> one_by_one(dpipe::global_order(records).in_order());
    one_by_one.seed(5);
    CHECK(dpipe::testing::epoch(one_by_one) == expected);
  }
}

TEST_CASE("indexed_records: hinted records are read together at the first read of one / then served from that batch",
          "[io][indexed]") {
  TempDir dir;
  const auto texts = numbered("r", 100, 30);
  const std::string path = dir.write("a.tfrecord", dpipe::testing::frames(texts));
  const auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path});
  const auto& node = dynamic_cast<const dpipe::io::IndexedRecords<IndexedFormat::kTFRecord>&>(records.node());
  for (const std::size_t key : {40U, 7U, 8U, 23U, 31U}) node.prefetch(key);
  node.prefetch(100);  // past size(): passed over
  node.prefetch(7);    // queued already
  auto batched = dpipe::io::detail::batched_records();
  CHECK(records.get(7) == texts[7]);  // reads 7, 8 (one read), 23, 31 and 40 at once
  // The bytes of record 23 change in the file: its read from the batch yields what the batch read.
  poke(path, node.locate(23).span.offset + 12, 'X');
  CHECK(records.get(40) == texts[40]);
  CHECK(records.get(23) == texts[23]);
  CHECK(records.get(8) == texts[8]);
  CHECK(records.get(50) == texts[50]);  // not hinted: read alone
  CHECK(dpipe::io::detail::batched_records() - batched == 4);
  // Record 31 was hinted and never read: no harm. A new batch replaces that one; record 23, read
  // alone now, shows the change.
  node.prefetch(60);
  CHECK(records.get(60) == texts[60]);
  CHECK_THAT(data_error_of([&] { (void)records.get(23); }),
             Catch::Contains("record 24: the data's CRC does not match"));
  poke(path, node.locate(23).span.offset + 12, texts[23][0]);

  // Hints beyond kMaxHints: the oldest give way, and are read alone.
  static_assert(dpipe::io::detail::IndexedReader::kMaxHints == 64);
  for (std::size_t key = 0; key < 70; ++key) node.prefetch(key);
  batched = dpipe::io::detail::batched_records();
  for (std::size_t key = 0; key < 70; ++key) CHECK(records.get(key) == texts[key]);
  CHECK(dpipe::io::detail::batched_records() - batched == 64);
  // Hints that are never read, with reads of other keys: each is read alone, as without hints.
  for (std::size_t key = 80; key < 90; ++key) node.prefetch(key);
  batched = dpipe::io::detail::batched_records();
  for (std::size_t key = 90; key < 100; ++key) CHECK(records.get(key) == texts[key]);
  CHECK(dpipe::io::detail::batched_records() == batched);
  CHECK(collect(records.to_iter()) == texts);
}

TEST_CASE("indexed_records: a batched read of a file cut short fails as a pread does", "[io][indexed]") {
  TempDir dir;
  const std::string path = dir.write("a.tfrecord", dpipe::testing::frames({"first", "second", "third", "fourth"}));
  const auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path});
  const auto& node = records.node();
  fs::resize_file(path, fs::file_size(path) - 3);
  const std::string alone = data_error_of([&] { (void)records.get(3); });
  CHECK_THAT(alone, Catch::Matches("indexed_records#[0-9]+: '" + path +
                                   "' byte offset 64: record 4: the file ends after 19 of the record's 22 bytes "
                                   "\\(it changed since it was indexed\\)"));
  for (const bool ring : {true, false}) {
    INFO((ring ? "io_uring" : "preads"));
    const RingSetting setting(ring);
    // Two reads: the first record, and the third and fourth (adjacent), cut short in the fourth.
    for (const std::size_t key : {0U, 2U, 3U}) node.prefetch(key);
    CHECK(records.get(2) == "third");
    CHECK(data_error_of([&] { (void)records.get(3); }) == alone);
    CHECK(records.get(0) == "first");
    // Two reads, the second cut short.
    for (const std::size_t key : {3U, 1U}) node.prefetch(key);
    CHECK(data_error_of([&] { (void)records.get(3); }) == alone);
    CHECK(records.get(1) == "second");
  }
}

TEST_CASE("indexed_records: memory_map reads the records pread reads / in every format", "[io][indexed]") {
  // Files of many pages: the records of a file's last page are read with pread, the others are
  // copied out of the map.
  const IndexOptions mapped{.memory_map = true};
  const auto copies = dpipe::io::detail::mapped_records();
  TFRecordFiles files;
  check_records(dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths, mapped),
                sequential(files.paths, dpipe::io::tfrecord_records()));
  CHECK(dpipe::io::detail::mapped_records() > copies);
  TempDir dir;
  std::string lines_text = "header\r\n";
  std::string json_text;
  std::string csv_text = "id,text\n";
  for (int i = 0; i < 2000; ++i) {
    lines_text +=
        "line " + std::to_string(i) + std::string(static_cast<std::size_t>(i % 40), '.') + (i % 3 ? "\n" : "\r\n");
    json_text += i % 5 == 0 ? "\n" : "{\"id\": " + std::to_string(i) + ", \"v\": [1, 2.5, null]}\n";
    csv_text += std::to_string(i) + ",\"quoted, " + std::to_string(i) + "\"\n";
  }
  const std::vector<std::string> lines{dir.write("a.txt", lines_text), dir.write("c.txt", ""),
                                       dir.write("b.txt", "four\r\nfive")};
  const auto before_lines = dpipe::io::detail::mapped_records();
  check_records(dpipe::io::indexed_records<IndexedFormat::kLines>(lines, mapped, {.skip_lines = 1}),
                sequential(lines, dpipe::io::readlines({.skip_lines = 1}, dpipe::io::lines_only)));
  CHECK(dpipe::io::detail::mapped_records() > before_lines);
  const std::vector<std::string> json{dir.write("a.jsonl", json_text)};
  check_records(dpipe::io::indexed_records<IndexedFormat::kJsonLines>(json, mapped),
                sequential(json, dpipe::io::parse_jsonl()));
  const std::vector<std::string> csv{dir.write("a.csv", csv_text)};
  check_records(dpipe::io::indexed_records<IndexedFormat::kCsv>(csv, mapped, {.skip_lines = 1}),
                sequential(csv, dpipe::io::parse_csv({.skip_lines = 1})));
  const std::string tar = dir / "a.tar";
  dpipe::testing::write_archive(tar, "pax", "none",
                                {{"s/000.jpg", std::string(100000, 'j')},
                                 {"s/000.cls", "0"},
                                 {"s/001.jpg", "1"},
                                 {"s/002.jpg", std::string(30000, 'k')}});
  check_records(dpipe::io::indexed_records<IndexedFormat::kTar>({tar}, mapped),
                sequential(std::vector{tar}, dpipe::io::load_from_tar()));
  check_records(dpipe::io::indexed_records<IndexedFormat::kWebDataset>({tar}, mapped),
                collect(dpipe::iter::from(std::vector{tar}) | dpipe::io::open_files() | dpipe::io::load_from_tar() |
                        dpipe::io::webdataset()));
  // A map needs no batches: hints are passed over, and nothing is read through a ring.
  const auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths, mapped);
  const auto batched = dpipe::io::detail::batched_records();
  for (const std::size_t key : {5U, 1U, 250U}) records.node().prefetch(key);
  CHECK(records.get(250) == sequential(files.paths, dpipe::io::tfrecord_records())[250]);
  CHECK(dpipe::io::detail::batched_records() == batched);
}

TEST_CASE("indexed_records: a file cut short under its map is the DataError pread gives / not a SIGBUS",
          "[io][indexed]") {
  // 12 records of a quarter page each (framed), cut inside the sixth: the file keeps part of its
  // second page (read through the map: zeros past the new end) and none of its third (read
  // through the map: SIGBUS).
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t framed = page / 4;
  TempDir dir;
  std::vector<std::string> texts;
  for (int i = 0; i < 12; ++i) texts.emplace_back(framed - 16, static_cast<char>('a' + i));
  const std::string path = dir.write("a.tfrecord", dpipe::testing::frames(texts));
  const auto mapped = dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path}, {.memory_map = true});
  const auto read = dpipe::io::indexed_records<IndexedFormat::kTFRecord>({path});
  CHECK(mapped.get(0) == texts[0]);  // the file is mapped whole
  fs::resize_file(path, 5 * framed + framed / 2);
  const auto cut = [&](std::size_t record, std::size_t got) {
    return fmt::format("'{}' byte offset {}: record {}: the file ends after {} of the record's {} bytes (it changed "
                       "since it was indexed)",
                       path, record * framed, record + 1, got, framed);
  };
  // The sixth record's first half is there and its second half reads as zeros through the map:
  // the cut, not a CRC error of zeros.
  CHECK(after_label(data_error_of([&] { (void)mapped.get(5); })) == cut(5, framed / 2));
  CHECK(after_label(data_error_of([&] { (void)read.get(5); })) == cut(5, framed / 2));
  // The tenth record's page is gone (SIGBUS); the handler stays for the next fault.
  CHECK(after_label(data_error_of([&] { (void)mapped.get(9); })) == cut(9, 0));
  CHECK(after_label(data_error_of([&] { (void)mapped.get(11); })) == cut(11, 0));
  // The fifth record is whole, but the page after it is gone: read with pread. The first record
  // is whole and the file holds the page after it: copied out of the map.
  CHECK(mapped.get(4) == texts[4]);
  const auto copies = dpipe::io::detail::mapped_records();
  CHECK(mapped.get(0) == texts[0]);
  CHECK(dpipe::io::detail::mapped_records() == copies + 1);

  // A SIGBUS outside a copy still ends the process: a child touches a page past the file's end.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int quiet = ::open("/dev/null", O_WRONLY);  // no report of the child's death (a sanitizer's, Catch's)
    ::dup2(quiet, STDOUT_FILENO);
    ::dup2(quiet, STDERR_FILENO);
    const int descriptor = ::open(path.c_str(), O_RDONLY);
    auto* pages = static_cast<volatile const char*>(::mmap(nullptr, 3 * page, PROT_READ, MAP_SHARED, descriptor, 0));
    if (pages == MAP_FAILED) ::_exit(3);
    const char byte = pages[2 * page];  // past the end: SIGBUS
    ::_exit(byte == 0 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));  // SIGBUS (or the sanitizer's abort after its report)
}

TEST_CASE("indexed_records: worker threads and processes read a global order through maps of their own",
          "[io][indexed][global][concurrency]") {
  TFRecordFiles files;
  const auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths, {.memory_map = true});
  std::vector<std::string> expected;
  for (const std::size_t key : global_keys(records.size(), 9)) expected.push_back(records.get(key));
  for (const auto kind : {dpipe::WorkerKind::kThread, dpipe::WorkerKind::kProcess}) {
    INFO((kind == dpipe::WorkerKind::kThread ? "worker threads" : "worker processes"));
    dpipe::DataLoader2<std::vector<std::string>> loader(
        dpipe::global_order(records).batch(64),
        dpipe::MultiProcessingReadingService({.num_workers = 2, .worker_kind = kind}));
    loader.seed(9);
    CHECK(flat_epoch(loader) == expected);
  }
}

TEST_CASE("indexed_records: worker processes read a global order with rings of their own",
          "[io][indexed][global][concurrency]") {
  TFRecordFiles files;
  const auto records = dpipe::io::indexed_records<IndexedFormat::kTFRecord>(files.paths);
  const auto& node = records.node();
  const auto order = global_keys(records.size(), 9);
  std::vector<std::string> expected;
  for (const std::size_t key : order) expected.push_back(records.get(key));
  /// Reads `order` in runs of 32, each hinted before it is read, as the global order's sampler
  /// does; true when each record is the one expected.
  const auto read_hinted = [&] {
    bool same = true;
    for (std::size_t first = 0; first < order.size(); first += 32) {
      const std::size_t end = std::min(order.size(), first + 32);
      for (std::size_t i = first; i < end; ++i) node.prefetch(order[i]);
      for (std::size_t i = first; i < end; ++i) same = same && records.get(order[i]) == expected[i];
    }
    return same;
  };
  // This process reads with hints first: its reader holds a ring when the workers fork.
  const auto rings = dpipe::io::detail::ring_reads();
  CHECK(read_hinted());
  const bool ring = dpipe::io::detail::ring_reads() > rings;
  dpipe::DataLoader2<std::vector<std::string>> loader(dpipe::global_order(records).batch(64),
                                                      dpipe::MultiProcessingReadingService({.num_workers = 2}));
  loader.seed(9);
  CHECK(flat_epoch(loader) == expected);

  // A child forked from a reader with a ring makes a ring of its own; the parent's still works.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 0;
    try {
      const auto made = dpipe::io::detail::rings_made();
      if (!read_hinted()) status = 1;
      if (ring && dpipe::io::detail::rings_made() != made + 1) status = 2;
    } catch (...) {
      status = 3;
    }
    ::_exit(status);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(read_hinted());
}

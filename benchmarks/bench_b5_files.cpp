// B5 (SPEC §11): files. Page-cached files in a fresh directory (or in $DPIPE_B5_DIR, kept for an
// outside comparison), read by dpipe's I/O pipelines in process and with 2 worker processes, each
// beside a command-line baseline on the same files in the same run. Targets: readlines at least
// 40% of `wc -l`'s bytes/s; CSV 300 MB/s per core; JSON lines in blocks at least 70% of simdjson's
// own parse_many over the same files, in process; tar / WebDataset shards
// at least 70% of `tar -xOf` to /dev/null; TFRecord with both CRCs checked 1 GB/s; with
// per-sample work dominating, 2 workers at least 1.7x the in-process rate.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <simdjson.h>
#include <string>
#include <unistd.h>
#include <utility>
#include <variant>
#include <vector>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "harness.hpp"
#include "io/crc32c.hpp"                // whether CRC32C runs in hardware (src/io)
#include "support/archive_writer.hpp"   // the tar shards (tests/support)
#include "support/tfrecord_writer.hpp"  // the TFRecord files (tests/support)

namespace {

namespace fs = std::filesystem;
constexpr int kRepeats = 3;
constexpr std::size_t kFiles = 8;  // of each text format, and TFRecord files
constexpr std::size_t kTextFileBytes = std::size_t{32} << 20;
constexpr std::size_t kShards = 8;
constexpr std::size_t kSamplesPerShard = 320;
constexpr std::size_t kSampleBytes = std::size_t{100} << 10;

/// The benchmark's directory: $DPIPE_B5_DIR, kept, or a fresh one removed at the end.
struct Scratch {
  fs::path path;
  bool keep = false;
  Scratch() {
    const char* given = std::getenv("DPIPE_B5_DIR");
    keep = given != nullptr && *given != '\0';
    path = keep ? fs::path(given) : fs::temp_directory_path() / ("dpipe-b5-" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (!keep) fs::remove_all(path);
  }
};

/// The best wall time of kRepeats runs of the shell command `command`, in seconds.
double time_command(const std::string& command) { return dpipe::bench::best_command_seconds(kRepeats, command); }

/// Prints a bytes/s line (and elements/s when `elements` is not 0) and returns the bytes/s.
double report_bytes(const std::string& name, double seconds, std::uint64_t bytes, std::uint64_t elements = 0) {
  const double rate = static_cast<double>(bytes) / seconds;
  std::printf("  %-56s %9.1f MB/s", name.c_str(), rate / 1e6);
  if (elements != 0) std::printf("  %7.2f M/s", static_cast<double>(elements) / seconds / 1e6);
  std::printf("  (%.3f s)\n", seconds);
  return rate;
}

/// About `rounds` passes of arithmetic over a sample: the per-sample work of a decoder.
std::uint64_t digest(const std::string& bytes, int rounds) {
  std::uint64_t hash = 1469598103934665603ULL;
  for (int round = 0; round < rounds; ++round)
    for (std::size_t i = 0; i < bytes.size(); i += 64)
      hash = (hash ^ static_cast<unsigned char>(bytes[i])) * 1099511628211ULL;
  return hash;
}

/// Reads `pipe`'s epoch under a loader in process, then with 2 worker processes, the best of
/// kRepeats each; checks that each saw `expected_elements` elements (unless 0) of `expected_size` in all
/// (size_of summed), and reports `bytes` (the files' bytes) per second. Returns the two rates.
template <class T, class Size>
std::pair<double, double> in_process_and_workers(const std::string& name, const dpipe::IterPipe<T>& pipe,
                                                 std::uint64_t bytes, std::uint64_t expected_elements,
                                                 std::uint64_t expected_size, Size size_of, bool& ok) {
  const auto run = [&](dpipe::DataLoader2<T>& loader, const std::string& label) {
    std::uint64_t elements = 0;
    std::uint64_t size = 0;
    const double seconds = dpipe::bench::best_seconds(
        kRepeats,
        [&] {
          std::uint64_t seen = 0;
          size = 0;
          for (const auto& element : loader) {
            size += size_of(element);
            ++seen;
          }
          return seen;
        },
        elements);
    if ((expected_elements != 0 && elements != expected_elements) || size != expected_size) {
      std::printf("  %s: WRONG OUTPUT (%llu elements of %llu bytes, expected %llu of %llu)\n", label.c_str(),
                  static_cast<unsigned long long>(elements), static_cast<unsigned long long>(size),
                  static_cast<unsigned long long>(expected_elements), static_cast<unsigned long long>(expected_size));
      ok = false;
    }
    return report_bytes(label, seconds, bytes, elements);
  };
  dpipe::DataLoader2<T> in_process(pipe, dpipe::InProcessReadingService());
  const double one = run(in_process, name + ", in process");
  dpipe::DataLoader2<T> workers(pipe, dpipe::MultiProcessingReadingService({.num_workers = 2}));
  const double two = run(workers, name + ", 2 worker processes");
  return {one, two};
}

/// Bytes/s of a hand-written loop that reads `paths` in 1 MiB blocks and makes a std::string of
/// each line, as readlines yields them: the ceiling for lines as strings, with no pipeline at all.
/// Clears `ok` unless it sees `lines` lines of `line_bytes` bytes in all.
double lines_by_hand_rate(const std::vector<std::string>& paths, std::uint64_t file_bytes, std::uint64_t lines,
                          std::uint64_t line_bytes, bool& ok) {
  std::vector<char> block(std::size_t{1} << 20);
  std::uint64_t seen = 0;
  const double seconds = dpipe::bench::best_seconds(
      kRepeats,
      [&] {
        std::uint64_t count = 0;
        std::uint64_t size = 0;
        for (const auto& path : paths) {
          std::ifstream file(path, std::ios::binary);
          std::string partial;  // a line that runs over the end of a block
          while (file.read(block.data(), static_cast<std::streamsize>(block.size())) || file.gcount() > 0) {
            const char* at = block.data();
            const char* const end = at + file.gcount();
            while (const auto* newline =
                       static_cast<const char*>(std::memchr(at, '\n', static_cast<std::size_t>(end - at)))) {
              std::string line = partial.empty() ? std::string(at, newline) : std::move(partial.append(at, newline));
              partial.clear();
              size += line.size();
              dpipe::bench::keep(line.data());
              ++count;
              at = newline + 1;
            }
            partial.append(at, end);
          }
        }
        ok = ok && count == lines && size == line_bytes;
        return count;
      },
      seen);
  return report_bytes("read + memchr + a std::string per line, by hand", seconds, file_bytes, seen);
}

std::string quoted_paths(const std::vector<std::string>& paths) {
  std::string list;
  for (const auto& path : paths) list += " '" + path + "'";
  return list;
}

/// Writes kFiles text files named `stem`-N`extension` of about kTextFileBytes each, line after
/// line from `line(file, index)`; returns their paths and adds their bytes and lines up.
template <class Line>
std::vector<std::string> write_text_files(const fs::path& dir, const std::string& stem, const std::string& extension,
                                          const Line& line, std::uint64_t& bytes, std::uint64_t& lines) {
  std::vector<std::string> paths;
  for (std::size_t file = 0; file < kFiles; ++file) {
    paths.push_back((dir / (stem + "-" + std::to_string(file) + extension)).string());
    std::string text;
    for (std::size_t index = 0; text.size() < kTextFileBytes; ++index, ++lines) text += line(file, index) + "\n";
    bytes += text.size();
    std::ofstream(paths.back(), std::ios::binary) << text;
  }
  return paths;
}

/// The files of `paths` shuffled, sharded and opened (in the workers).
dpipe::IterPipe<dpipe::io::OpenedFile> opened(const std::vector<std::string>& paths) {
  return dpipe::iter::from(paths) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() | dpipe::io::open_files();
}

bool bench_readlines(const fs::path& dir) {
  std::uint64_t file_bytes = 0;
  std::uint64_t lines = 0;
  const auto paths = write_text_files(
      dir, "text", ".txt",
      [](std::size_t file, std::size_t index) {
        return "line " + std::to_string(index) + " of file " + std::to_string(file) +
               ": the quick brown fox jumps over the lazy dog";
      },
      file_bytes, lines);
  const std::uint64_t line_bytes = file_bytes - lines;  // without their "\n"
  std::printf("B5 readlines: %zu text files, %.0f MiB, %llu lines, page-cached\n", kFiles,
              static_cast<double>(file_bytes) / (1 << 20), static_cast<unsigned long long>(lines));
  const double wc =
      report_bytes("wc -l (baseline)", time_command("wc -l" + quoted_paths(paths) + " > /dev/null"), file_bytes, lines);
  bool ok = true;
  const double by_hand = lines_by_hand_rate(paths, file_bytes, lines, line_bytes, ok);
  const auto [rate, rate2] = in_process_and_workers(
      "open | readlines (lines only)", opened(paths) | dpipe::io::readlines({}, dpipe::io::lines_only), file_bytes,
      lines, line_bytes, [](const std::string& line) { return line.size(); }, ok);
  // torchdata's default: (path, line) pairs, the path copied into each pair.
  const auto [with_path, with_path2] = in_process_and_workers(
      "open | readlines ((path, line) pairs)", opened(paths) | dpipe::io::readlines(), file_bytes, lines, line_bytes,
      [](const dpipe::io::PathLine& pair) { return pair.second.size(); }, ok);
  // Lines batched in the workers: one hand-over per 1024 lines instead of one per line.
  using Lines = std::vector<std::string>;
  const auto [batched, batched2] = in_process_and_workers(
      "open | readlines | batch(1024)",
      opened(paths) | dpipe::io::readlines({}, dpipe::io::lines_only) | dpipe::iter::batch(1024), file_bytes, 0,
      line_bytes,  // workers batch their own lines: the batch count varies
      [](const Lines& batch) {
        std::uint64_t size = 0;
        for (const auto& line : batch) size += line.size();
        return size;
      },
      ok);
  // dpipe's fast form: blocks of 1024 lines in one buffer each (LineBlock).
  const auto [blocks, blocks2] = in_process_and_workers(
      "open | readlines in_blocks(1024)", opened(paths) | dpipe::io::readlines({}, dpipe::io::in_blocks(1024)),
      file_bytes, 0, line_bytes,  // blocks end at the end of each file: the block count varies with the order
      [](const dpipe::io::LineBlock& block) {
        std::uint64_t size = 0;
        for (const std::string_view line : block) size += line.size();
        return size;
      },
      ok);
  // The same text gzip-compressed (one member per file): decompress holds each member back until
  // its trailer is checked; hold_back 0 passes the bytes on as they come, as before the hold-back.
  std::vector<std::string> gzipped;
  for (const auto& path : paths) {
    gzipped.push_back(path + ".gz");
    std::ifstream in(path, std::ios::binary);
    dpipe::testing::write_compressed(gzipped.back(), "gzip",
                                     {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()});
  }
  const double gunzip = report_bytes("gzip -dc (baseline, decompressed bytes)",
                                     time_command("gzip -dc" + quoted_paths(gzipped) + " > /dev/null"), file_bytes, 0);
  const auto decompressed_blocks = [&](std::uint64_t hold_back, const std::string& name) {
    return in_process_and_workers(
        name,
        opened(gzipped) | dpipe::io::decompress({.hold_back = hold_back}) |
            dpipe::io::readlines({}, dpipe::io::in_blocks(1024)),
        file_bytes, 0, line_bytes,
        [](const dpipe::io::LineBlock& block) {
          std::uint64_t size = 0;
          for (const std::string_view line : block) size += line.size();
          return size;
        },
        ok);
  };
  const auto [held, held2] =
      decompressed_blocks(dpipe::io::kDefaultHoldBack, "open | decompress (gzip) | readlines in_blocks(1024)");
  const auto [passed, passed2] =
      decompressed_blocks(0, "open | decompress (gzip, hold_back 0) | readlines in_blocks(1024)");
  std::printf(
      "B5 readlines gzip: held back until each member's trailer %.0f%% of gzip -dc, %.0f%% of hold_back 0 "
      "(2 workers %.0f%%)\n",
      100.0 * held / gunzip, 100.0 * held / passed, 100.0 * held2 / passed2);
  std::printf(
      "B5 readlines result: in blocks %.0f%% of wc -l (target >= 40%%), 2 workers %.2fx in process; a string per line "
      "%.0f%% (by hand, no pipeline: %.0f%%), 2 workers %.2fx; (path, line) pairs %.0f%% of lines only (2 workers "
      "%.2fx); batched by 1024, 2 workers %.2fx in process%s\n",
      100.0 * blocks / wc, blocks2 / blocks, 100.0 * rate / wc, 100.0 * by_hand / wc, rate2 / rate,
      100.0 * with_path / rate, with_path2 / with_path, batched2 / batched, ok ? "" : "  WRONG OUTPUT");
  return ok;
}

/// The kFiles text files of `line(file, index)` lines a parser reads, reported beside wc -l.
struct ParsedFiles {
  std::uint64_t bytes = 0;  // before paths: writing the files counts them
  std::uint64_t lines = 0;
  std::vector<std::string> paths;
  double wc = 0;  // wc -l's bytes/s over them

  template <class Line>
  ParsedFiles(const fs::path& dir, const std::string& title, const std::string& stem, const std::string& extension,
              const Line& line)
      : paths(write_text_files(dir, stem, extension, line, bytes, lines)) {
    std::printf("B5 %s: %zu files, %.0f MiB, %llu lines\n", title.c_str(), kFiles,
                static_cast<double>(bytes) / (1 << 20), static_cast<unsigned long long>(lines));
    wc = report_bytes("wc -l (baseline)", time_command("wc -l" + quoted_paths(paths) + " > /dev/null"), bytes, lines);
  }
};

/// A parser over `files`, in process and with 2 workers: `parse(files)` must yield one element per
/// line, each of `fields` (size_of).
template <class Parse, class Size>
std::pair<double, double> bench_parser(const ParsedFiles& files, const std::string& name, const Parse& parse,
                                       std::uint64_t fields, Size size_of, bool& ok) {
  return in_process_and_workers(name, parse(opened(files.paths)), files.bytes, files.lines, files.lines * fields,
                                size_of, ok);
}

/// Rows of 4 fields, one quoted and holding the delimiter: rows one by one and in blocks.
bool bench_csv(const fs::path& dir) {
  const ParsedFiles files(dir, "CSV", "rows", ".csv", [](std::size_t file, std::size_t index) {
    return std::to_string(file * 10000000 + index) + ",\"a caption, with a comma\",0." + std::to_string(index % 997) +
           ",label_" + std::to_string(index % 13);
  });
  bool ok = true;
  const auto [rate, rate2] = bench_parser(
      files, "open | parse_csv", [](const auto& opened_files) { return opened_files | dpipe::io::parse_csv(); }, 4,
      [](const dpipe::io::CsvRow& row) { return row.size(); }, ok);
  // dpipe's fast form: blocks of 1024 rows, fields as views into one buffer (CsvBlock).
  const auto [blocks, blocks2] = in_process_and_workers(
      "open | parse_csv in_blocks(1024)", opened(files.paths) | dpipe::io::parse_csv({}, dpipe::io::in_blocks(1024)),
      files.bytes, 0, files.lines * 4,
      [](const dpipe::io::CsvBlock& block) {
        std::uint64_t fields = 0;
        for (const auto row : block) fields += row.size();
        return fields;
      },
      ok);
  std::printf(
      "B5 CSV result: in blocks %.0f MB/s per core (target >= 300), %.0f%% of wc -l, 2 workers %.2fx in process; a "
      "vector of strings per row %.0f MB/s, 2 workers %.2fx%s\n",
      blocks / 1e6, 100.0 * blocks / files.wc, blocks2 / blocks, rate / 1e6, rate2 / rate, ok ? "" : "  WRONG OUTPUT");
  return ok;
}

/// simdjson's own parse_many over `paths`, by hand: each file loaded into one padded buffer and
/// parsed in batches of simdjson's default size (1 MB). Returns the documents and adds their
/// members to `members`; clears `ok` at a document that is not an object.
std::uint64_t parse_many_pass(simdjson::dom::parser& parser, const std::vector<std::string>& paths,
                              std::uint64_t& members, bool& ok) {
  std::uint64_t documents = 0;
  for (const auto& path : paths) {
    simdjson::padded_string text;
    simdjson::dom::document_stream stream;
    if (simdjson::padded_string::load(path).get(text) != simdjson::SUCCESS ||
        parser.parse_many(text).get(stream) != simdjson::SUCCESS) {
      ok = false;
      return documents;
    }
    for (auto document : stream) {
      simdjson::dom::object object;
      ok = ok && document.get(object) == simdjson::SUCCESS;
      members += object.size();
      ++documents;
    }
  }
  return documents;
}

/// Objects of 5 members: a number, a string, a double, an array and an object.
bool bench_jsonl(const fs::path& dir) {
  const ParsedFiles files(dir, "JSON lines", "records", ".jsonl", [](std::size_t file, std::size_t index) {
    return R"({"id":)" + std::to_string(file * 10000000 + index) +
           R"(,"text":"the quick brown fox jumps over the lazy dog","score":0.)" + std::to_string(index % 997) +
           R"(,"tags":["a","b"],"meta":{"file":)" + std::to_string(file) + "}}";
  });
  bool ok = true;
  // dpipe's fast form: blocks of 1024 lines parsed together, values read in place (JsonBlock).
  const auto blocks_of = opened(files.paths) | dpipe::io::parse_jsonl({}, dpipe::io::in_blocks(1024));
  const auto members_of = [](const dpipe::io::JsonBlock& block) {
    std::uint64_t members = 0;
    for (const dpipe::io::JsonView record : block) members += record.size();
    return members;
  };
  // The ceiling, simdjson's parse_many by hand with its default second thread for stage 1 and with
  // one thread, each run in turn with the blocks in process: a slow spell of the shared machine
  // falls on both, and their ratio holds.
  dpipe::DataLoader2<dpipe::io::JsonBlock> in_process(blocks_of, dpipe::InProcessReadingService());
  std::array<double, 2> ratio{};  // the blocks' rate over parse_many's: threaded, one thread
  for (const bool threaded : {true, false}) {
    simdjson::dom::parser parser;
    parser.threaded = threaded;
    std::uint64_t many_members = 0;
    std::uint64_t block_members = 0;
    std::uint64_t records = 0;
    const auto [many, blocks] = dpipe::bench::best_seconds_in_turn(
        kRepeats,
        [&] {
          many_members = 0;
          return parse_many_pass(parser, files.paths, many_members, ok);
        },
        [&] {
          std::uint64_t seen = 0;
          block_members = 0;
          for (const auto& block : in_process) {
            seen += block.size();
            block_members += members_of(block);
          }
          return seen;
        },
        records);
    ok = ok && records == files.lines && many_members == files.lines * 5 && block_members == files.lines * 5;
    report_bytes(
        threaded ? "simdjson parse_many by hand (stage 1 in a 2nd thread)" : "simdjson parse_many by hand, one thread",
        many, files.bytes, records);
    report_bytes("open | parse_jsonl in_blocks(1024), in process, in turn", blocks, files.bytes, records);
    ratio[threaded ? 0 : 1] = many / blocks;
  }
  const auto [blocks, blocks2] = in_process_and_workers("open | parse_jsonl in_blocks(1024)", blocks_of, files.bytes, 0,
                                                        files.lines * 5, members_of, ok);
  const auto [rate, rate2] = bench_parser(
      files, "open | parse_jsonl", [](const auto& opened_files) { return opened_files | dpipe::io::parse_jsonl(); }, 5,
      [](const dpipe::io::Json& value) { return value.size(); }, ok);
  std::printf(
      "B5 JSON lines result: in blocks %.0f%% of simdjson parse_many (target >= 70%%; %.0f%% of its one-thread "
      "form, per core), %.0f MB/s, 2 workers %.2fx in process; an owning Json per line %.0f MB/s (%.0f%% of the "
      "blocks), 2 workers %.2fx%s\n",
      100.0 * ratio[0], 100.0 * ratio[1], blocks / 1e6, blocks2 / blocks, rate / 1e6, 100.0 * rate / blocks,
      rate2 / rate, ok ? "" : "  WRONG OUTPUT");
  return ok;
}

bool bench_tfrecord(const fs::path& dir) {
  std::vector<std::string> paths;
  std::uint64_t file_bytes = 0;
  std::uint64_t record_bytes = 0;
  std::string image(kSampleBytes, '\0');
  for (std::size_t file = 0; file < kFiles; ++file) {
    paths.push_back((dir / ("records-" + std::to_string(file) + ".tfrecord")).string());
    std::string text;
    for (std::size_t record = 0; record < kSamplesPerShard; ++record) {
      for (std::size_t i = 0; i < image.size(); ++i) image[i] = static_cast<char>((i * 31 + record + file) & 0xff);
      const std::string data = dpipe::testing::example(
          {{"image", dpipe::testing::bytes_feature({image})},
           {"label", dpipe::testing::int64_feature({static_cast<std::int64_t>(record % 1000)}, true)}});
      text += dpipe::testing::frame(data);
      record_bytes += data.size();
    }
    file_bytes += text.size();
    std::ofstream(paths.back(), std::ios::binary) << text;
  }
  const std::uint64_t records = kFiles * kSamplesPerShard;
  std::printf(
      "B5 TFRecord: %zu files of %zu tf.train.Example records (a %zu KiB image and a label), %.0f MiB, "
      "CRC32C in %s\n",
      kFiles, kSamplesPerShard, kSampleBytes >> 10, static_cast<double>(file_bytes) / (1 << 20),
      dpipe::io::detail::crc32c_uses_hardware() ? "hardware (SSE4.2)" : "software");
  const double cat = report_bytes("cat > /dev/null (baseline)",
                                  time_command("cat" + quoted_paths(paths) + " > /dev/null"), file_bytes, records);
  bool ok = true;
  const auto [rate, rate2] = in_process_and_workers(
      "open | tfrecord_records (both CRCs checked)", opened(paths) | dpipe::io::tfrecord_records(), file_bytes, records,
      record_bytes, [](const std::string& record) { return record.size(); }, ok);
  const auto [decoded, decoded2] = in_process_and_workers(
      "open | load_from_tfrecord (CRCs, Example decoded)", opened(paths) | dpipe::io::load_from_tfrecord(), file_bytes,
      records, records * kSampleBytes,
      [](const dpipe::io::TFExample& example) {
        return std::get<dpipe::io::BytesList>(example.at("image")).at(0).size();
      },
      ok);
  std::printf(
      "B5 TFRecord result: %.2f GB/s per core (target >= 1), %.0f%% of cat, 2 workers %.2fx in process; "
      "decoded to Examples %.2f GB/s, 2 workers %.2fx%s\n",
      rate / 1e9, 100.0 * rate / cat, rate2 / rate, decoded / 1e9, decoded2 / decoded, ok ? "" : "  WRONG OUTPUT");
  return ok;
}

bool bench_tar(const fs::path& dir) {
  const auto paths = dpipe::testing::write_sample_shards(dir.string(), kShards, kSamplesPerShard, kSampleBytes);
  const std::uint64_t samples = kShards * kSamplesPerShard;
  const std::uint64_t member_bytes = samples * (kSampleBytes + 3);
  std::printf("B5 WebDataset tar: %zu shards of %zu samples (%zu KiB + a label), %.0f MiB of members\n", kShards,
              kSamplesPerShard, kSampleBytes >> 10, static_cast<double>(member_bytes) / (1 << 20));
  const double tar = report_bytes(
      "tar -xOf each shard > /dev/null (baseline)",
      time_command("for f in" + quoted_paths(paths) + "; do tar -xOf \"$f\"; done > /dev/null"), member_bytes);
  bool ok = true;
  const auto samples_of = opened(paths) | dpipe::io::load_from_tar() | dpipe::io::webdataset();
  const auto [rate, rate2] = in_process_and_workers(
      "open | load_from_tar | webdataset", samples_of, member_bytes, samples, member_bytes,
      [](const dpipe::io::WebDatasetSample& sample) { return sample[".jpg"].size() + sample[".cls"].size(); }, ok);

  // Per-sample work dominating: a decoder-like pass over each sample in the workers.
  const auto decoded =
      samples_of | dpipe::iter::map([](const dpipe::io::WebDatasetSample& sample) {
        return std::pair<std::uint64_t, std::uint64_t>{digest(sample[".jpg"], 40), sample[".jpg"].size() + 3};
      });
  const auto [work1, work2] = in_process_and_workers(
      "the same with per-sample decoding work", decoded, member_bytes, samples, member_bytes,
      [](const std::pair<std::uint64_t, std::uint64_t>& sample) { return sample.second; }, ok);
  std::printf(
      "B5 tar result: %.0f%% of tar -xOf (target >= 70%%), 2 workers %.2fx; with decoding work 2 workers %.2fx "
      "in process (target >= 1.7x)%s\n",
      100.0 * rate / tar, rate2 / rate, work2 / work1, ok ? "" : "  WRONG OUTPUT");
  return ok;
}

}  // namespace

/// Runs the sections named on the command line (readlines csv jsonl tfrecord tar), or all of them.
int main(int argc, char** argv) {
  const Scratch scratch;
  if (scratch.keep) std::printf("B5 writes its files into %s and keeps them\n", scratch.path.c_str());
  const std::vector<std::pair<std::string, bool (*)(const fs::path&)>> sections{{"readlines", bench_readlines},
                                                                                {"csv", bench_csv},
                                                                                {"jsonl", bench_jsonl},
                                                                                {"tfrecord", bench_tfrecord},
                                                                                {"tar", bench_tar}};
  const std::vector<std::string> chosen(argv + 1, argv + argc);
  bool ok = true;
  for (const auto& [name, run] : sections)
    if (chosen.empty() || std::find(chosen.begin(), chosen.end(), name) != chosen.end()) ok = run(scratch.path) && ok;
  return ok ? 0 : 1;
}

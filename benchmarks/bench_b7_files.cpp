// B7: indexed files. 16 TFRecord files of 1 KiB records (64 MiB) in a fresh directory, page-cached,
// then in the same run: (a) building their record indexes (a scan of each file and the index
// file written), (b) reading them front to back with `open_files | tfrecord_records`, and (c) a
// global shuffle over every record through the index: `global_order(indexed_records(paths))` in
// batches of 64 through a DataLoader2 in process, whose sampler hints each run of 32 keys before
// it reads them, so that each run is one batched read (io_uring). Beside them: the same random
// reads by get() alone (a Fisher-Yates order made before the clock starts: one pread each), and
// hinted as the sampler hints them, without the pipeline. (c) runs again with IndexOptions::
// memory_map, whose reads copy records out of maps of the files. Targets: index build >= 1 GB/s;
// (c) >= 50% of (b)'s records/s.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "harness.hpp"
#include "io/batch_read.hpp"            // whether batches went through io_uring (src/io)
#include "io/crc32c.hpp"                // whether CRC32C runs in hardware (src/io)
#include "support/tfrecord_writer.hpp"  // the TFRecord files (tests/support)

namespace {

namespace fs = std::filesystem;
constexpr int kRepeats = 5;
constexpr std::size_t kFiles = 16;
constexpr std::size_t kRecordsPerFile = 4096;
constexpr std::size_t kRecordBytes = 1008;  // 1 KiB framed
constexpr std::size_t kBatch = 64;          // the global order's step
constexpr std::size_t kRun = 32;            // what its sampler hints at once
constexpr std::size_t kColdRecords = 4096;  // the random reads of files out of the page cache
constexpr int kColdRepeats = 3;

/// A fresh directory, removed at the end.
struct Scratch {
  fs::path path = fs::temp_directory_path() / ("dpipe-b7-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(path); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { fs::remove_all(path); }
};

/// An order-independent digest of a record: what (b) and (c) must agree on.
std::uint64_t digest(const std::string& record) {
  return dpipe::io::detail::crc32c(record.data(), record.size()) * 0x9e3779b97f4a7c15ULL + record.size();
}

/// Prints a rate line: records/s and GB/s of record bytes.
double report(const char* name, double seconds, std::uint64_t records, std::uint64_t bytes) {
  const double rate = static_cast<double>(records) / seconds;
  std::printf("  %-58s %7.3f M records/s  %6.2f GB/s  (%.3f s)\n", name, rate / 1e6,
              static_cast<double>(bytes) / seconds / 1e9, seconds);
  return rate;
}

}  // namespace

int main() {
  const Scratch scratch;
  std::vector<std::string> paths;
  std::uint64_t file_bytes = 0;
  std::string record(kRecordBytes, '\0');
  for (std::size_t file = 0; file < kFiles; ++file) {
    paths.push_back((scratch.path / ("part-" + std::to_string(file) + ".tfrecord")).string());
    std::string text;
    text.reserve(kRecordsPerFile * (kRecordBytes + 16));
    for (std::size_t i = 0; i < kRecordsPerFile; ++i) {
      for (std::size_t b = 0; b < record.size(); b += 8) record[b] = static_cast<char>((i * 31 + b + file) & 0xff);
      text += dpipe::testing::frame(record);
    }
    file_bytes += text.size();
    std::ofstream(paths.back(), std::ios::binary) << text;
  }
  const std::uint64_t records = kFiles * kRecordsPerFile;
  const std::uint64_t record_bytes = records * kRecordBytes;
  std::printf("B7 indexed files: %zu TFRecord files of %zu records of %zu bytes, %.0f MiB, CRC32C in %s\n", kFiles,
              kRecordsPerFile, kRecordBytes, static_cast<double>(file_bytes) / (1 << 20),
              dpipe::io::detail::crc32c_uses_hardware() ? "hardware (SSE4.2)" : "software");

  // The page cache: every file read once before anything is timed.
  std::vector<char> block(std::size_t{1} << 20);
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    while (in.read(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }

  // (a) index build: each file scanned and its index file written (removed before each run).
  std::uint64_t indexed = 0;
  const double build_seconds = dpipe::bench::best_seconds(
      kRepeats,
      [&] {
        for (const auto& path : paths) fs::remove(dpipe::io::index_path(path));
        std::uint64_t count = 0;
        for (const auto& path : paths)
          count += dpipe::io::index_file(path, {.kind = dpipe::io::IndexKind::kTFRecord}).size();
        return count;
      },
      indexed);
  const double build_rate = static_cast<double>(file_bytes) / build_seconds;
  std::printf("  %-58s %7.2f M records/s  %6.2f GB/s  (%.3f s)\n", "(a) index build (scan + index file written)",
              static_cast<double>(indexed) / build_seconds / 1e6, build_rate / 1e9, build_seconds);

  // (b) sequential and (c) the global order through the index, in turn; then (c) again through
  // maps of the files (IndexOptions::memory_map), in turn with (b) again.
  const auto sequential = dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::tfrecord_records();
  const auto indexed_records = dpipe::io::indexed_records<dpipe::io::IndexedFormat::kTFRecord>(paths);
  dpipe::DataLoader2<std::vector<std::string>> global(dpipe::global_order(indexed_records).batch(kBatch));
  global.seed(1);
  std::uint64_t sequential_digest = 0;
  const auto read_sequential = [&] {
    std::uint64_t count = 0;
    sequential_digest = 0;
    for (const std::string& r : sequential) {
      sequential_digest += digest(r);
      ++count;
    }
    return count;
  };
  /// Reads an epoch of `loader`, its digest in `sum`; returns the records read.
  const auto read_global = [](dpipe::DataLoader2<std::vector<std::string>>& loader, std::uint64_t& sum) {
    std::uint64_t count = 0;
    sum = 0;
    for (const auto& batch : loader) {
      for (const std::string& r : batch) sum += digest(r);
      count += batch.size();
    }
    return count;
  };
  std::uint64_t global_digest = 0;
  std::uint64_t mapped_digest = 0;
  std::uint64_t read = 0;
  std::uint64_t mapped_read = 0;
  const auto rings = dpipe::io::detail::ring_reads();
  const auto [sequential_seconds, global_seconds] = dpipe::bench::best_seconds_in_turn(
      kRepeats, read_sequential, [&] { return read_global(global, global_digest); }, read);
  const bool ring = dpipe::io::detail::ring_reads() > rings;
  // The maps live in this scope: mapped pages cannot be evicted for the rows out of the page cache.
  const auto [sequential_again, mapped_seconds] = [&] {
    const auto mapped = dpipe::io::indexed_records<dpipe::io::IndexedFormat::kTFRecord>(paths, {.memory_map = true});
    dpipe::DataLoader2<std::vector<std::string>> mapped_global(dpipe::global_order(mapped).batch(kBatch));
    mapped_global.seed(1);
    return dpipe::bench::best_seconds_in_turn(
        kRepeats, read_sequential, [&] { return read_global(mapped_global, mapped_digest); }, mapped_read);
  }();
  const double sequential_rate =
      report("(b) open | tfrecord_records, in file order", sequential_seconds, records, record_bytes);
  const double global_rate = report(ring ? "(c) global_order(indexed_records).batch(64), io_uring"
                                         : "(c) global_order(indexed_records).batch(64), preads (no io_uring)",
                                    global_seconds, records, record_bytes);
  const double sequential_again_rate =
      report("(b) again, in turn with the next row", sequential_again, records, record_bytes);
  const double mapped_rate =
      report("(c) the same with memory_map (copies out of maps)", mapped_seconds, records, record_bytes);

  // For comparison: a random order (Fisher-Yates) read by get() alone, one pread per record; the
  // same hinted in runs of 32 as the sampler hints, without the pipeline; the keys in order, where
  // reads go ahead up to 64 KiB. Then files out of the page cache (fdatasync and
  // POSIX_FADV_DONTNEED on them before each run): the first kColdRecords keys of the random order
  // read by get() alone, then hinted, where the reads of a run wait on the disk together.
  std::vector<std::size_t> order(indexed_records.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 random(7);
  for (std::size_t i = order.size(); i > 1; --i) {  // Fisher-Yates
    std::uniform_int_distribution<std::size_t> pick(0, i - 1);
    std::swap(order[i - 1], order[pick(random)]);
  }
  const auto evict = [&] {
    for (const auto& path : paths) {
      const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (descriptor < 0) continue;
      (void)::fdatasync(descriptor);  // dirty pages stay cached
      (void)::posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED);
      ::close(descriptor);
    }
  };
  /// The best seconds of reading the records of the first `count` keys of `order` by get() of
  /// `records`, each run of kRun keys hinted first with `hinted`, the files evicted first with
  /// `evicted`; their digest in `sum`.
  bool counted = true;
  const auto time_order = [&](const auto& records_pipe, std::size_t count, bool hinted, bool evicted,
                              std::uint64_t& sum) {
    auto& node = records_pipe.node();
    std::uint64_t elements = 0;
    const double seconds = dpipe::bench::best_seconds(
        evicted ? kColdRepeats : kRepeats,
        [&] {
          if (evicted) evict();
          sum = 0;
          for (std::size_t first = 0; first < count; first += kRun) {
            const std::size_t end = std::min(count, first + kRun);
            if (hinted)
              for (std::size_t i = first; i < end; ++i) node.prefetch(order[i]);
            for (std::size_t i = first; i < end; ++i) sum += digest(node.get(order[i]));
          }
          return static_cast<std::uint64_t>(count);
        },
        elements);
    counted = counted && elements == count;
    return seconds;
  };
  std::uint64_t random_digest = 0;
  const double random_rate =
      report("    indexed_records, get() in a random order (a pread each)",
             time_order(indexed_records, records, false, false, random_digest), records, record_bytes);
  std::uint64_t hinted_digest = 0;
  const double hinted_rate =
      report("    the same, hinted in runs of 32 (batched reads)",
             time_order(indexed_records, records, true, false, hinted_digest), records, record_bytes);
  std::uint64_t in_order_digest = 0;
  const double in_order_seconds = dpipe::bench::best_seconds(
      kRepeats,
      [&] {
        in_order_digest = 0;
        for (std::size_t key = 0; key < order.size(); ++key) in_order_digest += digest(indexed_records.get(key));
        return static_cast<std::uint64_t>(order.size());
      },
      read);
  (void)report("    indexed_records, keys in order (reads go ahead)", in_order_seconds, records, record_bytes);
  std::uint64_t cold_digest = 0;
  const std::uint64_t cold_bytes = kColdRecords * kRecordBytes;
  const double cold_alone_rate =
      report("    not cached: get() in a random order (a pread each)",
             time_order(indexed_records, kColdRecords, false, true, cold_digest), kColdRecords, cold_bytes);
  const double cold_hinted_rate =
      report("    not cached: the same, hinted in runs of 32",
             time_order(indexed_records, kColdRecords, true, true, cold_digest), kColdRecords, cold_bytes);
  // Through maps, made after the eviction (a map keeps its pages in the cache): get() alone.
  double cold_mapped_seconds = 1e300;
  std::uint64_t cold_mapped_read = 0;
  for (int repeat = 0; repeat < kColdRepeats; ++repeat) {
    evict();
    const auto mapped = dpipe::io::indexed_records<dpipe::io::IndexedFormat::kTFRecord>(paths, {.memory_map = true});
    std::uint64_t sum = 0;
    const double seconds = dpipe::bench::seconds_of(
        [&] {
          for (std::size_t i = 0; i < kColdRecords; ++i) sum += digest(mapped.get(order[i]));
          return static_cast<std::uint64_t>(kColdRecords);
        },
        cold_mapped_read);
    cold_mapped_seconds = std::min(cold_mapped_seconds, seconds);
    counted = counted && sum == cold_digest && cold_mapped_read == kColdRecords;
  }
  const double cold_mapped_rate =
      report("    not cached: get() with memory_map", cold_mapped_seconds, kColdRecords, cold_bytes);

  const bool ok = indexed == records && read == records && mapped_read == records &&
                  global_digest == sequential_digest && mapped_digest == sequential_digest &&
                  random_digest == sequential_digest && hinted_digest == sequential_digest &&
                  in_order_digest == sequential_digest && counted;
  std::printf(
      "B7 result: index build %.2f GB/s (target >= 1); global order via index %.0f%% of sequential records/s, "
      "%.0f%% with memory_map (target >= 50%%); random get() %.0f%%, hinted %.0f%%; not cached: hinted %.1fx get(), "
      "memory_map %.1fx%s\n",
      build_rate / 1e9, 100.0 * global_rate / sequential_rate, 100.0 * mapped_rate / sequential_again_rate,
      100.0 * random_rate / sequential_rate, 100.0 * hinted_rate / sequential_rate, cold_hinted_rate / cold_alone_rate,
      cold_mapped_rate / cold_alone_rate, ok ? "" : "  WRONG OUTPUT");
  return ok ? 0 : 1;
}

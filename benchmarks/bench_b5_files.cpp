// B5 (SPEC §11): files. Page-cached files in a fresh directory, read by dpipe's I/O pipelines in
// process and with 2 worker processes, each beside a command-line baseline on the same files in
// the same run. Targets: readlines at least 40% of `wc -l`'s bytes/s; tar / WebDataset shards
// at least 70% of `tar -xOf` to /dev/null; with per-sample work dominating, 2 workers at least
// 1.7x the in-process rate.

#include <archive.h>
#include <archive_entry.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
constexpr int kRepeats = 3;
constexpr std::size_t kTextFiles = 8;
constexpr std::size_t kTextFileBytes = std::size_t{32} << 20;
constexpr std::size_t kShards = 8;
constexpr std::size_t kSamplesPerShard = 320;
constexpr std::size_t kSampleBytes = std::size_t{100} << 10;

/// A directory for the benchmark's files, removed at the end.
struct Scratch {
  fs::path path = fs::temp_directory_path() / ("dpipe-b5-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(path); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { fs::remove_all(path); }
};

/// The best wall time of `repeats` runs of the shell command `command`, in seconds.
double time_command(const std::string& command) {
  double best = 1e300;
  for (int i = 0; i < kRepeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (std::system(command.c_str()) != 0) std::printf("  (the command failed: %s)\n", command.c_str());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

/// Prints a bytes/s line and returns the rate.
double report_bytes(const std::string& name, double seconds, std::uint64_t bytes) {
  const double rate = static_cast<double>(bytes) / seconds;
  std::printf("  %-52s %9.1f MB/s  (%.3f s)\n", name.c_str(), rate / 1e6, seconds);
  return rate;
}

/// About `cost` rounds of arithmetic over a sample: the per-sample work of a decoder.
std::uint64_t digest(const std::string& bytes, int rounds) {
  std::uint64_t hash = 1469598103934665603ULL;
  for (int round = 0; round < rounds; ++round)
    for (std::size_t i = 0; i < bytes.size(); i += 64)
      hash = (hash ^ static_cast<unsigned char>(bytes[i])) * 1099511628211ULL;
  return hash;
}

/// Reads every element of `loader` once, the best of kRepeats, and reports bytes/s.
template <class Loader, class Size>
double measure_bytes(const std::string& name, Loader& loader, std::uint64_t expected_bytes, Size size_of, bool& ok) {
  std::uint64_t bytes = 0;
  const double seconds = dpipe::bench::best_seconds(
      kRepeats,
      [&] {
        std::uint64_t seen = 0;
        for (const auto& element : loader) seen += size_of(element);
        return seen;
      },
      bytes);
  if (bytes != expected_bytes) {
    std::printf("  %s: WRONG OUTPUT (%llu bytes, expected %llu)\n", name.c_str(),
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(expected_bytes));
    ok = false;
  }
  return report_bytes(name, seconds, bytes);
}

std::string quoted_paths(const std::vector<std::string>& paths) {
  std::string list;
  for (const auto& path : paths) list += " '" + path + "'";
  return list;
}

bool bench_readlines(const fs::path& dir) {
  std::vector<std::string> paths;
  std::uint64_t line_bytes = 0;
  std::uint64_t file_bytes = 0;
  for (std::size_t file = 0; file < kTextFiles; ++file) {
    paths.push_back((dir / ("text-" + std::to_string(file) + ".txt")).string());
    std::ofstream out(paths.back(), std::ios::binary);
    std::string text;
    for (std::size_t line = 0; text.size() < kTextFileBytes; ++line) {
      const auto content = "line " + std::to_string(line) + " of file " + std::to_string(file) +
                           ": the quick brown fox jumps over the lazy dog";
      line_bytes += content.size();
      text += content + "\n";
    }
    file_bytes += text.size();
    out << text;
  }
  std::printf("B5 readlines: %zu text files, %.0f MiB, page-cached\n", kTextFiles,
              static_cast<double>(file_bytes) / (1 << 20));
  const double wc =
      report_bytes("wc -l (baseline)", time_command("wc -l" + quoted_paths(paths) + " > /dev/null"), file_bytes);
  bool ok = true;
  const auto lines = dpipe::io::list_files(dir.string(), {"text-*.txt"}) | dpipe::iter::sharding_filter() |
                     dpipe::io::open_files() | dpipe::io::readlines({}, dpipe::io::lines_only);
  const auto size_of = [](const std::string& line) { return line.size(); };
  dpipe::DataLoader2<std::string> in_process(lines, dpipe::InProcessReadingService());
  const double rate =
      measure_bytes("list | open | readlines, in process (line bytes)", in_process, line_bytes, size_of, ok);
  dpipe::DataLoader2<std::string> workers(lines, dpipe::MultiProcessingReadingService({.num_workers = 2}));
  const double rate2 = measure_bytes("the same, 2 worker processes", workers, line_bytes, size_of, ok);
  std::printf("B5 readlines result: %.0f%% of wc -l (target >= 40%%), 2 workers %.2fx in process%s\n",
              100.0 * rate * static_cast<double>(file_bytes) / static_cast<double>(line_bytes) / wc, rate2 / rate,
              ok ? "" : "  WRONG OUTPUT");
  return ok;
}

void write_tar(const std::string& path, std::size_t shard) {
  archive* tar = archive_write_new();
  archive_write_set_format_pax_restricted(tar);
  archive_write_open_filename(tar, path.c_str());
  std::string bytes(kSampleBytes, '\0');
  for (std::size_t sample = 0; sample < kSamplesPerShard; ++sample) {
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 31 + sample + shard) & 0xff);
    const auto key = std::to_string(1000000 + shard * kSamplesPerShard + sample).substr(1);
    for (const auto& [suffix, size] : {std::pair<std::string, std::size_t>{".jpg", kSampleBytes}, {".cls", 3}}) {
      archive_entry* entry = archive_entry_new();
      archive_entry_set_pathname(entry, (key + suffix).c_str());
      archive_entry_set_filetype(entry, AE_IFREG);
      archive_entry_set_perm(entry, 0644);
      archive_entry_set_size(entry, static_cast<la_int64_t>(size));
      archive_write_header(tar, entry);
      archive_write_data(tar, bytes.data(), size);
      archive_entry_free(entry);
    }
  }
  archive_write_close(tar);
  archive_write_free(tar);
}

bool bench_tar(const fs::path& dir) {
  std::vector<std::string> paths;
  for (std::size_t shard = 0; shard < kShards; ++shard) {
    paths.push_back((dir / ("shard-" + std::to_string(shard) + ".tar")).string());
    write_tar(paths.back(), shard);
  }
  const std::uint64_t member_bytes = kShards * kSamplesPerShard * (kSampleBytes + 3);
  std::printf("B5 WebDataset tar: %zu shards of %zu samples (%zu KiB + a label), %.0f MiB of members\n", kShards,
              kSamplesPerShard, kSampleBytes >> 10, static_cast<double>(member_bytes) / (1 << 20));
  const double tar = report_bytes(
      "tar -xOf each shard > /dev/null (baseline)",
      time_command("for f in" + quoted_paths(paths) + "; do tar -xOf \"$f\"; done > /dev/null"), member_bytes);
  bool ok = true;
  const auto samples = dpipe::iter::from(paths) | dpipe::iter::sharding_filter() | dpipe::io::open_files() |
                       dpipe::io::load_from_tar() | dpipe::io::webdataset();
  const auto size_of = [](const dpipe::io::WebDatasetSample& sample) {
    return sample[".jpg"].size() + sample[".cls"].size();
  };
  dpipe::DataLoader2<dpipe::io::WebDatasetSample> in_process(samples, dpipe::InProcessReadingService());
  const double rate =
      measure_bytes("open | load_from_tar | webdataset, in process", in_process, member_bytes, size_of, ok);
  dpipe::DataLoader2<dpipe::io::WebDatasetSample> workers(samples,
                                                          dpipe::MultiProcessingReadingService({.num_workers = 2}));
  const double rate2 = measure_bytes("the same, 2 worker processes", workers, member_bytes, size_of, ok);

  // Per-sample work dominating: a decoder-like pass over each sample in the workers.
  const auto decoded =
      samples | dpipe::iter::map([](const dpipe::io::WebDatasetSample& sample) {
        return std::pair<std::uint64_t, std::uint64_t>{digest(sample[".jpg"], 40), sample[".jpg"].size() + 3};
      });
  const auto decoded_size = [](const std::pair<std::uint64_t, std::uint64_t>& sample) { return sample.second; };
  dpipe::DataLoader2<std::pair<std::uint64_t, std::uint64_t>> work_in_process(decoded,
                                                                              dpipe::InProcessReadingService());
  const double work1 =
      measure_bytes("with per-sample decoding work, in process", work_in_process, member_bytes, decoded_size, ok);
  dpipe::DataLoader2<std::pair<std::uint64_t, std::uint64_t>> work_workers(
      decoded, dpipe::MultiProcessingReadingService({.num_workers = 2}));
  const double work2 =
      measure_bytes("with per-sample decoding work, 2 worker processes", work_workers, member_bytes, decoded_size, ok);
  std::printf(
      "B5 tar result: %.0f%% of tar -xOf (target >= 70%%), 2 workers %.2fx; with decoding work 2 workers %.2fx "
      "in process (target >= 1.7x)%s\n",
      100.0 * rate / tar, rate2 / rate, work2 / work1, ok ? "" : "  WRONG OUTPUT");
  return ok;
}

}  // namespace

int main() {
  const Scratch scratch;
  bool ok = bench_readlines(scratch.path);
  ok = bench_tar(scratch.path) && ok;
  return ok ? 0 : 1;
}

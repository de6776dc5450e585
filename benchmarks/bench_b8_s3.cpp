// B8 (issue "Data where it lives"): object stores. 8 WebDataset shards of 32 MiB in a local
// S3-compatible server (s3rver, started from tests/s3 as the tests start it), read through
// open_files (read-ahead 2) | load_from_tar | webdataset over s3://, beside `curl` downloading the
// same objects one after another to /dev/null in the same run. Targets: >= 80% of curl's rate;
// with the cache warm, >= 90% of the same pipeline over the local files.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "harness.hpp"
#include "support/archive_writer.hpp"  // the tar shards (tests/support)
#include "support/s3_server.hpp"       // s3rver (tests/support)

namespace {

namespace fs = std::filesystem;
constexpr int kRepeats = 3;
constexpr std::size_t kShards = 8;
constexpr std::size_t kSamplesPerShard = 128;
constexpr std::size_t kSampleBytes = std::size_t{256} << 10;  // 128 x 256 KiB: a 32 MiB shard

/// The best wall time of kRepeats runs of the shell command `command`, in seconds.
double time_command(const std::string& command) { return dpipe::bench::best_command_seconds(kRepeats, command); }

/// The bytes of the members of every sample the pipeline over `paths` yields.
std::uint64_t read_samples(const std::vector<std::string>& paths, dpipe::io::OpenFilesOptions open) {
  std::uint64_t bytes = 0;
  for (const auto& sample :
       dpipe::iter::from(paths) | dpipe::io::open_files(open) | dpipe::io::load_from_tar() | dpipe::io::webdataset())
    for (const auto& field : sample.fields) bytes += field.second.size();
  return bytes;
}

double report(const char* name, double seconds, std::uint64_t bytes) {
  const double rate = static_cast<double>(bytes) / seconds;
  std::printf("  %-62s %8.1f MB/s\n", name, rate / 1e6);
  return rate;
}

}  // namespace

int main() {
  const fs::path dir = fs::temp_directory_path() / ("dpipe-b8-" + std::to_string(::getpid()));
  fs::create_directories(dir / "shards");
  const auto local =
      dpipe::testing::write_sample_shards((dir / "shards").string(), kShards, kSamplesPerShard, kSampleBytes);
  std::uint64_t object_bytes = 0;
  for (const auto& path : local) object_bytes += fs::file_size(path);
  const std::uint64_t member_bytes = kShards * kSamplesPerShard * (kSampleBytes + 3);

  dpipe::testing::S3TestServer server;
  server.upload("bench-b8", (dir / "shards").string());
  std::vector<std::string> urls;
  std::string curl = "curl -s -f";
  for (std::size_t shard = 0; shard < kShards; ++shard) {
    urls.push_back("s3://bench-b8/shard-" + std::to_string(shard) + ".tar");
    curl += " -o /dev/null " + server.server_endpoint() + "/bench-b8/shard-" + std::to_string(shard) + ".tar";
  }
  dpipe::io::S3Options options;
  options.endpoint = server.server_endpoint();  // s3rver itself, as curl reads it
  options.region = "us-east-1";
  options.credentials = dpipe::io::S3Credentials{"S3RVER", "S3RVER"};
  dpipe::io::set_s3_options(options);

  std::printf("B8 object store: %zu WebDataset shards of %.0f MiB in s3rver on loopback\n", kShards,
              static_cast<double>(object_bytes) / kShards / (1 << 20));
  const double curl_rate =
      report("curl, the objects one after another > /dev/null (baseline)", time_command(curl), object_bytes);
  bool ok = true;
  const auto timed = [&](const std::vector<std::string>& paths, dpipe::io::OpenFilesOptions open) {
    std::uint64_t elements = 0;
    return dpipe::bench::best_seconds(
        kRepeats,
        [&] {
          const auto got = read_samples(paths, open);
          ok = ok && got == member_bytes;
          return std::uint64_t{1};
        },
        elements);
  };
  // The rates count the objects' bytes, as curl's does.
  const double plain = report("s3:// | open_files | load_from_tar | webdataset", timed(urls, {}), object_bytes);
  const double ahead = report("s3:// | open_files(read_ahead 2) | load_from_tar | webdataset",
                              timed(urls, {.read_ahead = 2}), object_bytes);
  // The local files and the warm cache, run in turn: a slow spell of the machine falls on both.
  options.cache = {.directory = (dir / "cache").string()};
  dpipe::io::set_s3_options(options);
  (void)read_samples(urls, {});  // fills the cache
  const auto read_all = [&](const std::vector<std::string>& paths) {
    return [&] {
      ok = ok && read_samples(paths, {}) == member_bytes;
      return std::uint64_t{1};
    };
  };
  std::uint64_t runs = 0;
  const auto [local_seconds, cached_seconds] =
      dpipe::bench::best_seconds_in_turn(kRepeats, read_all(local), read_all(urls), runs);
  const double local_rate =
      report("local files | open_files | load_from_tar | webdataset", local_seconds, object_bytes);
  const double cached =
      report("s3:// with the cache warm | open_files | ... | webdataset", cached_seconds, object_bytes);
  std::printf(
      "B8 result: s3 %.0f%% of curl (target >= 80%%), %.0f%% without read-ahead; cache warm %.0f%% of local files "
      "(target >= 90%%)%s\n",
      100.0 * ahead / curl_rate, 100.0 * plain / curl_rate, 100.0 * cached / local_rate, ok ? "" : "  WRONG OUTPUT");
  fs::remove_all(dir);
  return ok ? 0 : 1;
}

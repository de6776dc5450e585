// Reads CSV objects from an S3-compatible store with two worker processes: the objects are listed
// under a prefix, shuffled and sharded in the trainer's graph, opened in the workers with the next
// ones read ahead, and kept in a local cache, so the second epoch reads the local disk. A
// checkpoint in the middle of the epoch resumes inside each object with a byte-range request.
//
// The store and the credentials come from the environment, as the AWS tools read them
// (AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, ~/.aws/...); ctest
// runs it against a local S3 server (tests/s3/run_example.js).

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

int main() {
  const auto cache = std::filesystem::temp_directory_path() / ("dpipe-s3-cache-" + std::to_string(getpid()));
  // [settings]
  auto options = dpipe::io::S3Options::from_environment();  // what the AWS CLI would use here
  options.cache = {.directory = cache.string(), .max_bytes = std::uint64_t{1} << 30};
  dpipe::io::set_s3_options(options);  // before the loader forks its workers
  // [settings]
  const std::string prefix = "s3://dpipe-example/train/";
  std::size_t listed = 0;
  for (const auto& path : dpipe::io::list_files(prefix, {"*.csv"})) listed += path.starts_with(prefix) ? 1U : 0U;
  std::printf("listed %zu objects under %s\n", listed, prefix.c_str());
  // [pipeline]
  auto make_loader = [&] {
    auto lines = dpipe::io::list_files(prefix, {"*.csv"})    // ListObjectsV2, sorted
                 | dpipe::iter::shuffle()                    // the same order in every worker
                 | dpipe::iter::sharding_filter()            // each worker keeps its objects
                 | dpipe::io::open_files({.read_ahead = 2})  // the next two open while one is read
                 | dpipe::io::readlines({.skip_lines = 1}, dpipe::io::lines_only);
    return dpipe::DataLoader2<std::string>(lines, dpipe::MultiProcessingReadingService({.num_workers = 2}));
  };
  // [pipeline]
  // Preempted after 250 lines: the checkpoint holds each worker's object and byte offset.
  std::vector<std::byte> checkpoint;
  std::size_t before = 0;
  {
    auto loader = make_loader();
    auto line = loader.begin();
    for (; before < 250; ++before, ++line) {
    }
    checkpoint = loader.state_dict();
  }
  auto resumed = make_loader();
  resumed.load_state_dict(checkpoint);  // each worker asks for the rest of its object (a range GET)
  std::size_t after = 0;
  for (const auto& line : resumed) after += line.ends_with(",sample") ? 1U : 0U;
  std::printf("read %zu lines, checkpoint, then %zu more: %zu in all\n", before, after, before + after);
  // The next epoch reads the cached copies: no object is downloaded again.
  std::size_t cached_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache))
    cached_files += entry.path().extension() == ".object";
  long id_sum = 0;
  std::size_t again = 0;
  for (const auto& line : resumed) {
    id_sum += std::stol(line.substr(0, line.find(',')));
    ++again;
  }
  std::printf("epoch 2 from the cache (%zu objects): %zu lines, id sum %ld\n", cached_files, again, id_sum);
  std::filesystem::remove_all(cache);
  return 0;
}

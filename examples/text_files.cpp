// Reads a directory of text files with two worker processes: the paths are listed, shuffled and
// sharded in the trainer's graph, and each worker opens only its own files. A checkpoint in the
// middle of the epoch restores by reopening the one file each worker was reading.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

int main() {
  const auto dir = std::filesystem::temp_directory_path() / ("dpipe-text-files-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (int part = 0; part < 8; ++part) {
    std::ofstream file(dir / ("part-" + std::to_string(part) + ".csv"));
    file << "id,text\n";
    for (int row = 0; row < 100; ++row) file << part * 100 + row << ",sample\n";
  }
  // [pipeline]
  auto make_loader = [&] {
    auto lines = dpipe::io::list_files(dir.string(), {"*.csv"})  // paths, sorted
                 | dpipe::iter::shuffle()                        // the same order in every worker
                 | dpipe::iter::sharding_filter()                // each worker keeps its files
                 | dpipe::io::open_files()                       // opened in the worker
                 | dpipe::io::readlines({.skip_lines = 1}, dpipe::io::lines_only);
    return dpipe::DataLoader2<std::string>(lines, dpipe::MultiProcessingReadingService({.num_workers = 2}));
  };
  // [pipeline]
  auto loader = make_loader();
  std::size_t read = 0;
  std::vector<std::byte> checkpoint;
  for (const auto& line : loader) {
    (void)line;
    if (++read == 250) {
      checkpoint = loader.state_dict();
      break;
    }
  }
  auto resumed = make_loader();
  resumed.load_state_dict(checkpoint);
  std::size_t rest = 0;
  for (const auto& line : resumed) rest += line.ends_with(",sample") ? 1U : 0U;
  std::printf("read %zu lines, checkpoint, then %zu more: %zu in all\n", read, rest, read + rest);
  std::filesystem::remove_all(dir);
  return 0;
}

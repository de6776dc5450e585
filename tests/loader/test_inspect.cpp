// dpipe-inspect, run as a program on checkpoint files a test writes: the summary, every node with
// its scalar fields, the workers' nodes, and a clear error for a file that is not a checkpoint.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"

namespace {

using dpipe::testing::range;

/// A file in the temporary directory, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::vector<std::byte>& bytes) {
    char name[] = "/tmp/dpipe-inspect-XXXXXX";
    const int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    close(fd);
    path_ = name;
    std::ofstream out(path_, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

struct Run {
  int status = -1;
  std::vector<std::string> lines;  // stdout and stderr
};

Run inspect(const std::string& path) {
  Run run;
  FILE* pipe = popen((std::string(DPIPE_INSPECT_PROGRAM) + " " + path + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string line;
  for (int c = std::fgetc(pipe); c != EOF; c = std::fgetc(pipe)) {
    if (c == '\n') {
      run.lines.push_back(line);
      line.clear();
    } else {
      line.push_back(static_cast<char>(c));
    }
  }
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST_CASE("dpipe-inspect: a loader's checkpoint shows its epoch / position / nodes and fields", "[loader][inspect]") {
  dpipe::DataLoader2<std::vector<int>> loader(dpipe::iter::from(range(10)).shuffle(4).batch(2),
                                              dpipe::InProcessReadingService());
  loader.seed(0);
  auto it = loader.begin();
  ++it;
  (void)*it;  // two batches handed out
  const auto blob = loader.state_dict();
  const TempFile file(blob);
  const Run run = inspect(file.path());
  CHECK(run.status == 0);
  // The loader may have read batches ahead of the two it handed out (small elements are read in
  // runs): the checkpoint then holds them, and the source's position covers them too.
  const auto read_ahead = std::ranges::find_if(
      run.lines, [](const std::string& line) { return line.starts_with("  loader:read_ahead = "); });
  std::size_t ahead = 0;
  if (read_ahead != run.lines.end()) {
    std::smatch match;
    REQUIRE(
        std::regex_match(*read_ahead, match, std::regex("  loader:read_ahead = <[0-9]+ bytes: ([0-9]+) elements>")));
    ahead = std::stoul(match[1].str());
    CHECK(ahead >= 1);
  }
  const std::size_t extra = read_ahead != run.lines.end() ? 1 : 0;
  REQUIRE(run.lines.size() == 24 + extra);
  CHECK(run.lines[0] == "dpipe checkpoint: format 4, " + std::to_string(blob.size()) + " bytes, " +
                            std::to_string(21 + extra) + " fields");
  CHECK(run.lines[1] == "epoch: 1, elements taken in it: 2, epoch ended: false, paused: false");
  CHECK(run.lines[2] == "pipeline (3 nodes with state or settings):");
  CHECK(run.lines[3] == "  batch (std::vector<int>) batch_size=2 drop_last=false");
  CHECK(run.lines[4] == "  batch/shuffle (int) buffer_size=4");
  CHECK(run.lines[5] == "  batch/shuffle/from (int) length=10");
  CHECK(run.lines[6] == "worker processes: 0 (in process), ranks: 1");
  CHECK(run.lines[7] == "nodes (2):");
  CHECK_THAT(run.lines[8], Catch::Matches("  graph/batch/shuffle \\(int\\), [0-9]+ bytes: enabled=true "
                                          "pending_seed=<1 bytes> draining=false rng=<[0-9]+ bytes> "
                                          "buffer=<[0-9]+ bytes>"));
  // Two batches handed out, `ahead` read ahead, and the shuffle's buffer of four filled first.
  const std::size_t consumed = std::min<std::size_t>(10, 2 * (2 + ahead) + 4);
  CHECK(run.lines[9] == "  graph/batch/shuffle/from (int), 8 bytes: position=" + std::to_string(consumed));
  CHECK(run.lines[10] == "other fields (" + std::to_string(13 + extra) + "):");
  CHECK_THAT(run.lines[11], Catch::Matches("  loader:pipeline = <[0-9]+ bytes, above>"));
  CHECK(run.lines[12] == "  loader:fingerprint = \"\"");
  CHECK(run.lines[13] == "  loader:service = \"dpipe::InProcessReadingService\"");
  CHECK(run.lines[14] == "  loader:seed = <9 bytes>");
  CHECK(run.lines[15] == "  loader:reset_seed = false");
  CHECK(run.lines[18] == "  loader:epoch = 1");
  CHECK(run.lines[19] == "  loader:taken = 2");
  CHECK(run.lines[21] == "  loader:paused = false");
  CHECK(run.lines[22 + extra] == "  loader:mode = \"state\"");
  CHECK(run.lines[23 + extra] == "  loader:service_state = false");
}

/// dpipe-inspect's output for the checkpoint of `loader` seeded 1 after 5 elements.
template <class T>
Run inspect_after_five(dpipe::DataLoader2<T>& loader) {
  loader.seed(1);
  auto it = loader.begin();
  for (int i = 0; i < 5; ++i) ++it;
  const TempFile file(loader.state_dict());
  loader.shutdown();
  return inspect(file.path());
}

TEST_CASE("dpipe-inspect: a checkpoint of worker processes shows each worker's nodes", "[loader][inspect]") {
  dpipe::DataLoader2<int> loader(dpipe::iter::from(range(40)).shuffle(4).sharding_filter(),
                                 dpipe::MultiProcessingReadingService({.num_workers = 2}));
  const Run run = inspect_after_five(loader);
  CHECK(run.status == 0);
  REQUIRE(run.lines.size() > 6);
  CHECK(run.lines[1] == "epoch: 1, elements taken in it: 5, epoch ended: false, paused: false");
  // The pipeline the loader was built from, before the service split it among the workers.
  CHECK(run.lines[2] == "pipeline (3 nodes with state or settings):");
  CHECK(run.lines[3] == "  sharding_filter (int)");
  CHECK(run.lines[4] == "  sharding_filter/shuffle (int) buffer_size=4");
  CHECK(run.lines[5] == "  sharding_filter/shuffle/from (int) length=40");
  CHECK(run.lines[6] == "worker processes: 2, ranks: 1");
  std::vector<std::string> nodes;
  for (const auto& line : run.lines) {
    if (line.starts_with("  ") && line.find(" (int), ") != std::string::npos)
      nodes.push_back(line.substr(2, line.find(" (") - 2));
  }
  CHECK(nodes == std::vector<std::string>{
                     "service/worker0/graph/sharding_filter", "service/worker0/graph/sharding_filter/shuffle",
                     "service/worker0/graph/sharding_filter/shuffle/from", "service/worker1/graph/sharding_filter",
                     "service/worker1/graph/sharding_filter/shuffle",
                     "service/worker1/graph/sharding_filter/shuffle/from", "graph/merge_workers"});
}

TEST_CASE("dpipe-inspect: a global-order checkpoint shows the global position", "[loader][inspect][global]") {
  dpipe::DataLoader2<std::vector<int>> loader(dpipe::global_order(range(40)).batch(4),
                                              dpipe::MultiProcessingReadingService({.num_workers = 2}));
  const Run run = inspect_after_five(loader);
  CHECK(run.status == 0);
  REQUIRE(run.lines.size() > 3);
  CHECK(run.lines[1] == "epoch: 1, elements taken in it: 5, epoch ended: false, paused: false");
  CHECK(run.lines[2] ==
        "global order: step 5, elements of it delivered: 0 (restores onto any worker count and world size)");
}

TEST_CASE("dpipe-inspect: a file that is not a checkpoint / a missing file / a directory are clear errors",
          "[loader][inspect]") {
  const TempFile file(std::vector<std::byte>(40, std::byte{7}));
  const Run garbage = inspect(file.path());
  CHECK(garbage.status == 1);
  CHECK(garbage.lines == std::vector<std::string>{"dpipe-inspect: " + file.path() +
                                                  ": the bytes are not a dpipe checkpoint (bad magic)"});
  const Run missing = inspect("/nonexistent/checkpoint");
  CHECK(missing.status == 1);
  CHECK(missing.lines ==
        std::vector<std::string>{"dpipe-inspect: /nonexistent/checkpoint: cannot open it: No such file or directory"});
  const Run directory = inspect("/tmp");
  CHECK(directory.status == 1);
  CHECK(directory.lines == std::vector<std::string>{"dpipe-inspect: /tmp: not a regular file"});
}

TEST_CASE("dpipe-inspect: without a file it prints its usage / --help prints it on stdout", "[loader][inspect]") {
  const Run none = inspect("");
  CHECK(none.status == 2);
  CHECK(none.lines ==
        std::vector<std::string>{"usage: dpipe-inspect <checkpoint file>", "  prints what a dpipe checkpoint holds"});
  const Run help = inspect("--help 2>/dev/null");
  CHECK(help.status == 0);
  CHECK(help.lines == none.lines);
}

TEST_CASE("dpipe-inspect: the fields of a node's parts count with the node", "[loader][inspect]") {
  // merge_workers keeps what the workers produced but the loop has not received under its parts
  // ("graph/merge_workers/input0:stored"): they belong to merge_workers, not to "other fields".
  dpipe::DataLoader2<int> loader(dpipe::iter::from(range(40)).sharding_filter(),
                                 dpipe::MultiProcessingReadingService({.num_workers = 2}));
  loader.seed(1);
  auto it = loader.begin();
  ++it;
  const TempFile file(loader.state_dict());
  loader.shutdown();
  const Run run = inspect(file.path());
  CHECK(run.status == 0);
  std::string merge;
  bool part_in_others = false;
  bool in_others = false;
  for (const auto& line : run.lines) {
    if (line.starts_with("  graph/merge_workers ")) merge = line;
    if (line.starts_with("other fields")) in_others = true;
    if (in_others && line.find("merge_workers/") != std::string::npos) part_in_others = true;
  }
  CHECK_THAT(merge, Catch::Contains(" input0:stored=") && Catch::Contains(" input1:stored="));
  CHECK_FALSE(part_in_others);
}

TEST_CASE("dpipe-inspect: a checkpoint of an earlier format is refused as such", "[loader][inspect]") {
  const Run run = inspect(std::string(DPIPE_TEST_DATA_DIR) + "/format1_loader.bin");
  CHECK(run.status == 1);
  REQUIRE(run.lines.size() == 1);
  CHECK_THAT(run.lines[0], Catch::Contains("the checkpoint was written by an earlier dpipe in format 1"));
}

}  // namespace

TEST_CASE("dpipe-inspect: a job's checkpoint file shows each rank's loader in turn", "[loader][inspect]") {
  char directory[] = "/tmp/dpipe-inspect-job-XXXXXX";
  REQUIRE(mkdtemp(directory) != nullptr);
  const std::string path = std::string(directory) + "/job.ckpt";
  dpipe::DataLoader2<int> loader(dpipe::iter::from(range(10)), dpipe::InProcessReadingService());
  auto it = loader.begin();
  for (int i = 0; i < 5; ++i) ++it;
  loader.save_job_checkpoint(path);
  const Run run = inspect(path);
  std::remove(path.c_str());
  rmdir(directory);
  CHECK(run.status == 0);
  REQUIRE(run.lines.size() > 4);
  CHECK(run.lines[1] == "a job's checkpoint: 1 rank, each restored by DataLoader2::load_job_checkpoint");
  CHECK(run.lines[2] == "== rank 0");
  CHECK(run.lines[3] == "epoch: 1, elements taken in it: 5, epoch ended: false, paused: false");
  CHECK(std::count(run.lines.begin(), run.lines.end(), "== rank 0") == 1);
}

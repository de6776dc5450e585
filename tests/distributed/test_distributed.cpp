// DistributedReadingService with real ranks: separate processes started with each launcher's
// environment (tests/distributed/rank_program.cpp), meeting over a TcpStore on loopback.
//
// The expected orders are torchdata's: they were produced by torchdata v0.7.1's own
// DistributedReadingService, MultiProcessingReadingService and FullSync, run as two gloo ranks
// on 127.0.0.1 (Debian's torch 1.13 with torch 2.x's sharding module, without NumPy in the
// workers, as dpipe seeds), and cross-checked by replaying the logged seeds.

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/free_port.hpp"
#include "support/rank_job.hpp"
#include "support/temp_dir.hpp"

namespace {

using dpipe::testing::Environment;
using dpipe::testing::free_port;
using dpipe::testing::RankOutcome;
using dpipe::testing::run_ranks;

/// How the ranks were started.
enum class Launcher { kTorchrun, kSlurm, kOpenMpi, kPmi };

std::vector<Environment> launch(Launcher launcher, std::size_t world = 2) {
  const std::uint16_t port = free_port();
  std::vector<Environment> ranks;
  for (std::size_t rank = 0; rank < world; ++rank) {
    const std::string r = std::to_string(rank);
    const std::string w = std::to_string(world);
    switch (launcher) {
      case Launcher::kTorchrun:
        ranks.push_back(dpipe::testing::torchrun_environment(rank, world, port));
        break;
      case Launcher::kSlurm:
        ranks.push_back({{"SLURM_PROCID", r},
                         {"SLURM_NTASKS", w},
                         {"SLURM_LOCALID", r},
                         {"SLURM_JOB_ID", "4242"},
                         {"SLURM_JOB_NODELIST", "localhost"},
                         {"DPIPE_STORE_PORT", std::to_string(port)}});
        break;
      case Launcher::kOpenMpi:
        ranks.push_back({{"OMPI_COMM_WORLD_RANK", r},
                         {"OMPI_COMM_WORLD_SIZE", w},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", r},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", w},
                         {"DPIPE_STORE_PORT", std::to_string(port)},
                         {"DPIPE_STORE_TOKEN", "mpi-test"}});
        break;
      case Launcher::kPmi:
        ranks.push_back({{"PMI_RANK", r},
                         {"PMI_SIZE", w},
                         {"MASTER_ADDR", "127.0.0.1"},
                         {"DPIPE_STORE_PORT", std::to_string(port)}});
        break;
    }
  }
  return ranks;
}

std::vector<RankOutcome> run(const std::vector<std::string>& args, const std::vector<Environment>& ranks) {
  return run_ranks(DPIPE_RANK_PROGRAM, args, ranks);
}

std::vector<RankOutcome> run(const std::vector<std::string>& args, Launcher launcher = Launcher::kTorchrun) {
  return run(args, launch(launcher));
}

std::string epoch_line(std::size_t epoch, const std::vector<int>& values) {
  std::string line = "epoch " + std::to_string(epoch) + ":";
  for (const int value : values) line += " " + std::to_string(value);
  return line + "\n";
}

/// Requires that every rank exited 0, and returns what they printed.
std::vector<std::string> outputs(const std::vector<RankOutcome>& outcomes) {
  std::vector<std::string> printed;
  for (std::size_t rank = 0; rank < outcomes.size(); ++rank) {
    INFO("rank " << rank << " printed:\n" << outcomes[rank].out << "\nand logged:\n" << outcomes[rank].err);
    REQUIRE(outcomes[rank].exited(0));
    printed.push_back(outcomes[rank].out);
  }
  return printed;
}

std::vector<int> evens(int below) {
  std::vector<int> values;
  for (int i = 0; i < below; i += 2) values.push_back(i);
  return values;
}

std::vector<int> plus_one(std::vector<int> values) {
  for (int& value : values) ++value;
  return values;
}

}  // namespace

TEST_CASE("Distributed: fullsync stops both ranks at the smaller shard (torchdata T47)", "[distributed]") {
  // 23 elements over 2 ranks: shards of 12 and 11, each rank yields 11, in two epochs.
  const auto printed = outputs(run({"sharded", "--epochs", "2"}));
  const std::vector<int> rank0 = evens(22);
  CHECK(printed[0] == epoch_line(0, rank0) + epoch_line(1, rank0));
  CHECK(printed[1] == epoch_line(0, plus_one(rank0)) + epoch_line(1, plus_one(rank0)));
}

TEST_CASE("Distributed: every launcher's environment places the ranks", "[distributed]") {
  const auto launcher = GENERATE(Launcher::kTorchrun, Launcher::kSlurm, Launcher::kOpenMpi, Launcher::kPmi);
  const auto printed = outputs(run({"sharded"}, launcher));
  CHECK(printed[0] == epoch_line(0, evens(22)));
  CHECK(printed[1] == epoch_line(0, plus_one(evens(22))));
}

TEST_CASE("Distributed: torchdata's order for a shuffle before the sharding point", "[distributed]") {
  struct Case {
    std::string seed;
    std::vector<std::vector<int>> rank0;  // by epoch
    std::vector<std::vector<int>> rank1;
  };
  const auto c = GENERATE(Case{"123",
                               {{17, 12, 3, 7, 4, 8, 18, 2, 20, 6, 16},
                                {9, 18, 10, 4, 16, 20, 2, 6, 22, 15, 7},
                                {15, 12, 6, 0, 13, 8, 18, 10, 20, 3, 17}},
                               {{10, 21, 22, 5, 13, 0, 9, 11, 19, 1, 15},
                                {8, 5, 17, 11, 13, 1, 3, 19, 21, 0, 12},
                                {22, 11, 5, 2, 14, 4, 9, 21, 19, 7, 16}}},
                          Case{"0",
                               {{19, 18, 0, 10, 9, 20, 14, 15, 21, 7, 12},
                                {10, 17, 15, 16, 2, 12, 3, 21, 20, 9, 11},
                                {1, 17, 6, 16, 10, 20, 3, 4, 7, 0, 5}},
                               {{8, 1, 6, 3, 17, 13, 11, 5, 4, 2, 22},
                                {22, 4, 0, 19, 13, 8, 1, 18, 14, 5, 6},
                                {15, 22, 18, 14, 8, 2, 9, 11, 13, 21, 19}}},
                          Case{"18446744073709551615",
                               {{17, 5, 12, 3, 10, 19, 16, 22, 9, 6, 15},
                                {11, 15, 13, 5, 19, 3, 16, 22, 6, 2, 18},
                                {13, 7, 17, 5, 0, 4, 8, 22, 3, 9, 19}},
                               {{0, 1, 2, 13, 4, 14, 21, 20, 18, 7, 8},
                                {20, 21, 17, 7, 1, 14, 10, 0, 4, 12, 9},
                                {1, 2, 14, 11, 15, 12, 6, 16, 10, 18, 20}}});
  INFO("seed " << c.seed);
  const auto printed = outputs(run({"shuffled", "--seed", c.seed, "--epochs", "3"}));
  const auto lines = [](const std::vector<std::vector<int>>& epochs) {
    std::string text;
    for (std::size_t epoch = 0; epoch < epochs.size(); ++epoch) text += epoch_line(epoch, epochs[epoch]);
    return text;
  };
  CHECK(printed[0] == lines(c.rank0));
  CHECK(printed[1] == lines(c.rank1));
}

TEST_CASE("Distributed: a shuffle after the sharding point draws a seed per rank as torchdata's does",
          "[distributed]") {
  const auto printed = outputs(run({"shuffled4", "--seed", "123", "--epochs", "3"}));
  CHECK(printed[0] == epoch_line(0, {12, 7, 8, 3, 2, 20, 18, 4, 14, 17, 6}) +
                          epoch_line(1, {9, 10, 20, 2, 4, 16, 6, 7, 22, 15, 18}) +
                          epoch_line(2, {6, 0, 13, 8, 15, 18, 3, 10, 17, 1, 12}));
  CHECK(printed[1] == epoch_line(0, {10, 21, 5, 22, 13, 11, 0, 15, 19, 1, 9}) +
                          epoch_line(1, {17, 11, 1, 5, 19, 8, 21, 3, 13, 0, 12}) +
                          epoch_line(2, {22, 11, 5, 9, 2, 21, 14, 16, 7, 19, 4}));
}

TEST_CASE("Distributed: 2 ranks x 2 workers give torchdata's order (T18 T19)", "[distributed]") {
  const auto kind = GENERATE(std::string("processes"), std::string("threads"));
  INFO("worker " << kind);
  std::vector<std::string> workers{"--workers", "2"};
  if (kind == "threads") workers.emplace_back("--threads");
  const auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), workers.begin(), workers.end());
    return args;
  };
  SECTION("41 elements without a shuffle: instance worker + 2 * rank, 20 per rank") {
    const auto printed = outputs(run(with({"plain41", "--epochs", "2"})));
    std::vector<int> rank0;
    for (int i = 0; i < 40; i += 4) rank0.insert(rank0.end(), {i, i + 1});
    std::vector<int> rank1;
    for (const int value : rank0) rank1.push_back(value + 2);
    CHECK(printed[0] == epoch_line(0, rank0) + epoch_line(1, rank0));
    CHECK(printed[1] == epoch_line(0, rank1) + epoch_line(1, rank1));
  }
  SECTION("a shuffle before the sharding point") {
    const auto printed = outputs(run(with({"large", "--seed", "123", "--epochs", "2"})));
    CHECK(printed[0] == epoch_line(0, {35, 21, 6, 40, 16, 38, 24, 30, 4, 33, 15, 1, 12, 27, 7, 3, 31, 17, 32, 26}) +
                            epoch_line(1, {14, 7, 33, 2, 3, 9, 34, 22, 16, 23, 18, 11, 26, 32, 17, 35, 5, 8, 20, 30}));
    CHECK(printed[1] ==
          epoch_line(0, {23, 39, 13, 9, 11, 0, 8, 34, 28, 10, 37, 29, 19, 18, 14, 22, 36, 20, 5, 2}) +
              epoch_line(1, {27, 13, 15, 38, 12, 25, 6, 10, 24, 19, 28, 36, 31, 0, 29, 40, 4, 21, 1, 39}));
  }
  SECTION("and a shuffle in each worker") {
    const auto printed = outputs(run(with({"large4", "--seed", "123", "--epochs", "2"})));
    CHECK(printed[0] == epoch_line(0, {16, 40, 35, 38, 24, 30, 12, 27, 6, 1, 15, 33, 32, 21, 31, 3, 7, 17, 25, 26}) +
                            epoch_line(1, {34, 7, 33, 22, 3, 23, 14, 32, 18, 9, 26, 35, 5, 8, 20, 2, 17, 30, 16, 11}));
    CHECK(printed[1] ==
          epoch_line(0, {13, 34, 28, 0, 11, 9, 8, 18, 14, 22, 19, 20, 37, 29, 36, 39, 23, 2, 5, 10}) +
              epoch_line(1, {6, 25, 15, 10, 28, 19, 12, 0, 24, 38, 29, 40, 27, 36, 4, 21, 31, 13, 1, 39}));
  }
}

namespace {

/// The elements of each "epoch N:" line of `printed`, in order: {epoch 0's, epoch 1's, ...}.
std::vector<std::string> epochs_of(const std::string& printed) {
  std::vector<std::string> epochs;
  std::istringstream lines(printed);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("epoch ")) epochs.push_back(line.substr(line.find(':') + 1));
  }
  return epochs;
}

}  // namespace

TEST_CASE("Distributed: a checkpoint of every rank after k elements resumes exactly", "[distributed][checkpoint]") {
  struct Case {
    std::string pipeline;
    std::vector<std::string> workers;
    std::vector<std::string> block;
    std::size_t k;
  };
  const auto c =
      GENERATE(Case{"large", {}, {}, 0}, Case{"large", {}, {}, 1}, Case{"large", {}, {}, 4}, Case{"large", {}, {}, 20},
               Case{"large", {"--workers", "2"}, {}, 0}, Case{"large", {"--workers", "2"}, {}, 1},
               Case{"large", {"--workers", "2"}, {}, 4}, Case{"large", {"--workers", "2"}, {}, 20},
               Case{"long", {"--workers", "2"}, {"--block", "64"}, 1500},
               Case{"long", {"--workers", "2", "--threads"}, {"--block", "64"}, 1500},
               Case{"long", {}, {"--block", "64"}, 4999});
  INFO(c.pipeline << " " << fmt::format("{}", fmt::join(c.workers, " ")) << " after " << c.k);
  const dpipe::testing::TempDir dir;
  const auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> all{c.pipeline, "--seed", "7", "--epochs", "2"};
    all.insert(all.end(), c.workers.begin(), c.workers.end());
    all.insert(all.end(), c.block.begin(), c.block.end());
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  };
  const auto whole = outputs(run(args({})));
  const auto saved = outputs(run(args({"--save-after", std::to_string(c.k), dir / "rank{rank}.ckpt"})));
  const auto resumed = outputs(run(args({"--load", dir / "rank{rank}.ckpt"})));
  for (std::size_t rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    const auto expected = epochs_of(whole[rank]);
    REQUIRE(expected.size() == 2);
    REQUIRE(saved[rank].ends_with("saved after " + std::to_string(c.k) + "\n"));
    const auto before = c.k == 0 ? std::string() : epochs_of(saved[rank]).at(0);
    const auto after = epochs_of(resumed[rank]);
    REQUIRE(after.size() == 2);
    CHECK(before + after[0] == expected[0]);
    CHECK(after[1] == expected[1]);
  }
}

TEST_CASE("Distributed: a checkpoint restores only on its own rank and world size", "[distributed][checkpoint]") {
  const dpipe::testing::TempDir dir;
  (void)outputs(run({"large", "--seed", "7", "--save-after", "3", dir / "rank{rank}.ckpt"}));
  const auto swapped = run({"large", "--seed", "7", "--load", dir / "rank{peer}.ckpt"}, launch(Launcher::kTorchrun));
  CHECK(swapped[0].exited(3));
  CHECK(swapped[0].out ==
        "error dpipe::StateError: the checkpoint was saved by rank 1 of a world of 2; this process is rank 0 of a "
        "world of 2: restore each rank from its own checkpoint, on the same world size\n");
  CHECK(swapped[1].out ==
        "error dpipe::StateError: the checkpoint was saved by rank 0 of a world of 2; this process is rank 1 of a "
        "world of 2: restore each rank from its own checkpoint, on the same world size\n");
  const auto alone = run({"large", "--load", dir / "rank0.ckpt"}, std::vector<Environment>{Environment{}});
  CHECK(alone[0].out ==
        "error dpipe::StateError: the checkpoint was saved by rank 0 of a world of 2; this process is rank 0 of a "
        "world of 1: restore each rank from its own checkpoint, on the same world size\n");
}

TEST_CASE("Distributed: one checkpoint file for the job resumes every rank exactly", "[distributed][checkpoint]") {
  struct Case {
    std::string pipeline;
    std::vector<std::string> workers;
    std::size_t k;
  };
  const auto c = GENERATE(Case{"large", {}, 4}, Case{"large", {"--workers", "2"}, 4},
                          Case{"long", {"--workers", "2", "--threads", "--block", "64"}, 1500});
  INFO(c.pipeline << " " << fmt::format("{}", fmt::join(c.workers, " ")) << " after " << c.k);
  const dpipe::testing::TempDir dir;
  const std::string file = dir / "job.ckpt";
  const auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> all{c.pipeline, "--seed", "7", "--epochs", "2", "--job-checkpoint"};
    all.insert(all.end(), c.workers.begin(), c.workers.end());
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  };
  const auto whole = outputs(run(args({})));
  const auto saved = outputs(run(args({"--save-after", std::to_string(c.k), file})));
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.str())) files.push_back(entry.path().string());
  CHECK(files == std::vector<std::string>{file});  // one file, written by rank 0
  const auto resumed = outputs(run(args({"--load", file})));
  for (std::size_t rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    const auto expected = epochs_of(whole[rank]);
    REQUIRE(expected.size() == 2);
    REQUIRE(saved[rank].ends_with("saved after " + std::to_string(c.k) + "\n"));
    const auto after = epochs_of(resumed[rank]);
    REQUIRE(after.size() == 2);
    CHECK(epochs_of(saved[rank]).at(0) + after[0] == expected[0]);
    CHECK(after[1] == expected[1]);
  }
}

TEST_CASE("Distributed: a job's checkpoint file restores only on its world size", "[distributed][checkpoint]") {
  const dpipe::testing::TempDir dir;
  const std::string file = dir / "job.ckpt";
  (void)outputs(run({"large", "--seed", "7", "--job-checkpoint", "--save-after", "3", file}));
  const auto three = launch(Launcher::kTorchrun, 3);
  const auto outcomes = run({"large", "--seed", "7", "--job-checkpoint", "--load", file}, three);
  const std::string refusal = "checkpoint file " + file +
                              ": it holds the states of a job of 2 ranks, this job has 3: resume the job on 2 ranks";
  CHECK(outcomes[0].exited(3));
  CHECK(outcomes[0].out == "error dpipe::StateError: " + refusal + "\n");
  const int port = std::stoi(three[0].at("MASTER_PORT")) + 1;
  for (std::size_t rank = 1; rank < 3; ++rank) {
    CHECK(outcomes[rank].exited(3));
    CHECK(outcomes[rank].out ==
          fmt::format("error dpipe::StateError: DistributedReadingService (rank {} of 3 under torchrun, rank 0 serving "
                      "the store at 127.0.0.1:{}): restoring the job's checkpoint: rank 0 failed: {}\n",
                      rank, port, refusal));
  }
  const auto alone = run({"large", "--job-checkpoint", "--load", file}, std::vector<Environment>{Environment{}});
  CHECK(alone[0].out == "error dpipe::StateError: checkpoint file " + file +
                            ": it holds the states of a job of 2 ranks, this job has 1: resume the job on 2 ranks\n");
}

TEST_CASE("Distributed: the epoch length with workers is what every rank yields", "[distributed]") {
  // 41 ids on 2 ranks x 2 workers: shards of 11, 10, 10 and 10, so 21 and 20 per rank: 20 each.
  for (const auto& kind : std::vector<std::vector<std::string>>{{"--workers", "2"}, {"--workers", "2", "--threads"}}) {
    INFO(fmt::format("{}", fmt::join(kind, " ")));
    std::vector<std::string> args{"large", "--seed", "3", "--print-length"};
    args.insert(args.end(), kind.begin(), kind.end());
    const auto printed = outputs(run(args));
    for (std::size_t rank = 0; rank < 2; ++rank) {
      REQUIRE(printed[rank].starts_with("length 20\n"));
      const auto epochs = epochs_of(printed[rank]);
      REQUIRE(epochs.size() == 1);
      CHECK(std::count(epochs[0].begin(), epochs[0].end(), ' ') == 20);
    }
  }
}

TEST_CASE("Distributed: two loaders of one job keep their keys apart", "[distributed]") {
  const auto both = outputs(run({"large", "--seed", "5", "--epochs", "2", "--second-loader"}));
  const auto first = outputs(run({"large", "--seed", "5", "--epochs", "2"}));
  const auto second = outputs(run({"large", "--seed", "6", "--epochs", "2"}));
  for (std::size_t rank = 0; rank < 2; ++rank) {
    const auto a = epochs_of(first[rank]);
    const auto b = epochs_of(second[rank]);
    CHECK(both[rank] == "loader 1 epoch 0:" + a[0] + "\nloader 2 epoch 0:" + b[0] + "\nloader 1 epoch 1:" + a[1] +
                            "\nloader 2 epoch 1:" + b[1] + "\n");
  }
}

TEST_CASE("Distributed: a rank whose pipeline throws stops every rank with its reason", "[distributed][faults]") {
  const auto workers = GENERATE(0, 2);
  INFO(workers << " workers");
  auto ranks = launch(Launcher::kTorchrun);
  ranks[1]["DPIPE_TEST_FAIL_RANK"] = "1";
  const auto outcomes =
      run({"long", "--seed", "3", "--workers", std::to_string(workers), "--fail-after", "100"}, ranks);
  REQUIRE(outcomes[0].exited(3));
  REQUIRE(outcomes[1].exited(3));
  // Rank 1 sees its own failure, rank 0 a RendezvousError naming rank 1 and the same failure. With
  // workers, each worker's copy of the map throws on its element 100; worker 0's comes first.
  const std::regex own(workers == 0 ? "error (std::runtime_error: sample ([0-9]+) is corrupt)\n"
                                    : "error (dpipe::WorkerError: Caught std::runtime_error in worker process 0\\.\n"
                                      "Original message: sample ([0-9]+) is corrupt\n"
                                      "Raised by map#[0-9]+'s function while worker process 0 produced element 100 of "
                                      "its stream in this epoch \\(counting from 0\\)\\.)\n");
  std::smatch failed;
  INFO(outcomes[1].out);
  REQUIRE(std::regex_search(outcomes[1].out, failed, own));
  const std::string reason = failed[1].str();
  CHECK_THAT(outcomes[0].out,
             Catch::StartsWith("error dpipe::RendezvousError: DistributedReadingService (rank 0 of 2 under torchrun, "
                               "rank 0 serving the store at 127.0.0.1:") &&
                 Catch::Contains("): fullsync round ") && Catch::EndsWith(": rank 1 failed: " + reason + "\n"));
}

TEST_CASE("Distributed: a rank killed mid-epoch is named by the others", "[distributed][faults]") {
  const auto workers = GENERATE(0, 2);
  INFO(workers << " workers");
  auto ranks = launch(Launcher::kTorchrun);
  ranks[1]["DPIPE_TEST_KILL_RANK"] = "1";
  const auto outcomes = run({"long", "--workers", std::to_string(workers), "--kill-after", "100"}, ranks);
  CHECK(outcomes[1].signaled(SIGKILL));
  REQUIRE(outcomes[0].exited(3));
  CHECK_THAT(outcomes[0].out,
             Catch::StartsWith("error dpipe::RendezvousError: DistributedReadingService (rank 0 of 2 under torchrun") &&
                 Catch::EndsWith(": rank 1 is gone: its connection to the store closed (the process ended or was "
                                 "killed)\n"));
}

TEST_CASE("Distributed: the store's host killed mid-epoch stops the other ranks", "[distributed][faults]") {
  auto ranks = launch(Launcher::kTorchrun);
  ranks[0]["DPIPE_TEST_KILL_RANK"] = "0";
  const auto outcomes = run({"long", "--kill-after", "100"}, ranks);
  CHECK(outcomes[0].signaled(SIGKILL));
  REQUIRE(outcomes[1].exited(3));
  INFO(outcomes[1].out);
  // In a round, its request fails; between rounds, its watch of the store hears the connection close.
  CHECK(std::regex_match(
      outcomes[1].out,
      std::regex("error dpipe::RendezvousError: DistributedReadingService \\(rank 1 of 2 under torchrun, rank 0 "
                 "serving the store at 127\\.0\\.0\\.1:[0-9]+\\): (fullsync round ([0-9]+) of its epoch 1: TcpStore: "
                 "exchange\\(post 'loader/0/fullsync0/1/[0-9]+', collect 'loader/0/fullsync0/1/\\2', rank 1 of 2\\): "
                 "the connection to the store at 127\\.0\\.0\\.1:[0-9]+ failed: .+|rank 0 is gone: the store it "
                 "served closed the connection without a word \\(its process ended or was killed\\))\n")));
}

TEST_CASE("Distributed: a rank that never arrives is named at the timeout", "[distributed][faults]") {
  auto ranks = launch(Launcher::kTorchrun);
  SECTION("rank 1 missing") {
    const auto outcomes = run({"large", "--timeout-ms", "1500"}, {ranks[0]});
    REQUIRE(outcomes[0].exited(3));
    CHECK(std::regex_match(
        outcomes[0].out,
        std::regex("error dpipe::RendezvousError: DistributedReadingService \\(rank 0 of 2 under "
                   "torchrun, rank 0 serving the store at 127\\.0\\.0\\.1:[0-9]+\\): meeting the other "
                   "ranks: TcpStore: all_gather\\('loader/0/run', rank 0 of 2\\): rank 1 did not "
                   "arrive within 1500 ms\n")));
  }
  SECTION("rank 0 missing") {
    const auto outcomes = run({"large", "--timeout-ms", "1500"}, {ranks[1]});
    REQUIRE(outcomes[0].exited(3));
    CHECK(std::regex_match(
        outcomes[0].out, std::regex("error dpipe::RendezvousError: DistributedReadingService \\(rank 1 of 2 under "
                                    "torchrun, rank 0 serving the store at 127\\.0\\.0\\.1:[0-9]+\\): cannot meet the "
                                    "other ranks: TcpStore: cannot reach the store at 127\\.0\\.0\\.1:[0-9]+ within "
                                    "1500 ms \\(Connection refused\\)\n")));
  }
}

TEST_CASE("Distributed: a slow rank finishes after the store's rank is done", "[distributed]") {
  // Rank 1 takes 20 ms per element: rank 0 agrees a round ahead and is done first; its store
  // stays until rank 1 has collected the rounds it still needs.
  auto ranks = launch(Launcher::kTorchrun);
  ranks[0]["DPIPE_TEST_SLOW_RANK"] = "1";
  ranks[1]["DPIPE_TEST_SLOW_RANK"] = "1";
  const auto slow = outputs(run({"shuffled", "--seed", "123", "--slow-ms", "20"}, ranks));
  CHECK(slow[0] == epoch_line(0, {17, 12, 3, 7, 4, 8, 18, 2, 20, 6, 16}));
  CHECK(slow[1] == epoch_line(0, {10, 21, 22, 5, 13, 0, 9, 11, 19, 1, 15}));
  const auto stopped = outputs(run({"long", "--slow-ms", "5", "--stop-after", "40"}, ranks));
  for (const auto& output : stopped) CHECK(output.ends_with("stopped after 40\n"));
}

TEST_CASE("Distributed: ranks that stop mid-epoch leave cleanly", "[distributed][faults]") {
  const auto workers = GENERATE(0, 2);
  const auto printed = outputs(run({"long", "--workers", std::to_string(workers), "--stop-after", "700"}));
  for (const auto& output : printed) CHECK(output.ends_with("stopped after 700\n"));
}

TEST_CASE("Distributed: a rank killed while the others hand out what was agreed is named at once",
          "[distributed][faults]") {
  // Blocks of 65536: when rank 1 kills itself after 70000 elements, the others have agreed on
  // 131071 and hand them out at 1 ms each from then on. They name rank 1 at their next element,
  // not a minute later at their next round; in a world of 3, rank 2 names rank 1 too, not rank 0
  // (which shuts down because of it).
  const std::size_t world = GENERATE(std::size_t{2}, std::size_t{3});
  INFO("a world of " << world);
  auto ranks = launch(Launcher::kTorchrun, world);
  for (std::size_t rank = 0; rank < world; ++rank) {
    ranks[rank]["DPIPE_TEST_KILL_RANK"] = "1";
    ranks[rank]["DPIPE_TEST_SLOW_RANK"] = std::to_string(rank);
  }
  const auto outcomes = run({"huge", "--block", "65536", "--kill-after", "70000", "--slow-after", "70000", "--slow-ms",
                             "1", "--report-received", "--timeout-ms", "120000"},
                            ranks);
  CHECK(outcomes[1].signaled(SIGKILL));
  for (std::size_t rank = 0; rank < world; rank += rank == 0 ? 2 : 1) {
    INFO("rank " << rank << " printed:\n" << outcomes[rank].out);
    REQUIRE(outcomes[rank].exited(3));
    std::smatch match;
    REQUIRE(std::regex_match(
        outcomes[rank].out, match,
        std::regex(fmt::format("received ([0-9]+)\nerror dpipe::RendezvousError: DistributedReadingService \\(rank "
                               "{} of {} under torchrun, rank 0 serving the store at 127\\.0\\.0\\.1:[0-9]+\\): rank "
                               "1 is gone: its connection to the store closed \\(the process ended or was killed\\)\n",
                               rank, world))));
    // Long before the 131071 agreed (61 s of steps at 1 ms): within a few steps of rank 1's death.
    CHECK(std::stoul(match[1].str()) < 75000);
  }
}

TEST_CASE("Distributed: a rank refused for a wrong job token stops rank 0 at once", "[distributed][faults]") {
  auto ranks = launch(Launcher::kTorchrun);
  ranks[1]["DPIPE_STORE_TOKEN"] = "another";
  const auto outcomes = run({"large", "--timeout-ms", "100000"}, ranks);
  REQUIRE(outcomes[0].exited(3));
  REQUIRE(outcomes[1].exited(3));
  const std::string port = ranks[0].at("MASTER_PORT");
  const std::string store = "127.0.0.1:" + std::to_string(std::stoul(port) + 1);
  CHECK(outcomes[1].out ==
        "error dpipe::RendezvousError: DistributedReadingService (rank 1 of 2 under torchrun, rank "
        "0 serving the store at " +
            store +
            "): cannot meet the other ranks: TcpStore: the store refused the connection: a wrong "
            "job token (" +
            store + ")\n");
  CHECK(outcomes[0].out ==
        "error dpipe::RendezvousError: DistributedReadingService (rank 0 of 2 under torchrun, rank "
        "0 serving the store at " +
            store +
            "): meeting the other ranks: TcpStore: all_gather('loader/0/run', rank 0 of 2): rank 1 "
            "is gone: the store refused its connection: a wrong job token\n");
}

TEST_CASE("Distributed: a restored rank beside a fresh one is refused at once naming both",
          "[distributed][checkpoint]") {
  const dpipe::testing::TempDir dir;
  (void)outputs(run({"large", "--seed", "7", "--save-after", "3", dir / "rank{rank}.ckpt"}));
  auto ranks = launch(Launcher::kTorchrun);
  for (auto& rank : ranks) rank["DPIPE_TEST_LOAD_RANK"] = "0";
  const auto outcomes =
      run({"large", "--seed", "7", "--timeout-ms", "100000", "--load", dir / "rank{rank}.ckpt"}, ranks);
  for (std::size_t rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << " printed:\n" << outcomes[rank].out);
    REQUIRE(outcomes[rank].exited(3));
    CHECK(std::regex_match(
        outcomes[rank].out,
        std::regex(fmt::format(
            "error dpipe::RendezvousError: DistributedReadingService \\(rank {} of 2 under torchrun, rank 0 serving "
            "the store at 127\\.0\\.0\\.1:[0-9]+\\): the ranks disagree about what they run: rank 0 starts epoch "
            "round 1 restored from a checkpoint, pipeline fingerprint ([0-9a-f]{{16}}), service fingerprint "
            "([0-9a-f]{{16}}); rank 1 starts epoch round 0 fresh, pipeline fingerprint \\1, service fingerprint \\2 "
            "\\(a checkpoint of every rank restores them together; every rank builds the same pipeline and "
            "options\\)\n",
            rank))));
  }
}

TEST_CASE("Distributed: a rank of another job on the same port is refused at once naming both",
          "[distributed][faults]") {
  // Two jobs without a job id (the default token): job B's rank 1, of a world of 3, comes to the
  // store of job A (a world of 2) and is refused once A's rank 0 greeted it; job A runs on.
  auto job_a = launch(Launcher::kTorchrun);
  const std::uint16_t port = static_cast<std::uint16_t>(std::stoul(job_a[0].at("MASTER_PORT")) + 1);
  auto stray = dpipe::testing::torchrun_environment(1, 3, port);
  for (std::size_t rank = 0; rank < 2; ++rank) {
    job_a[rank].erase("TORCHELASTIC_RUN_ID");
    job_a[rank]["DPIPE_TEST_SLOW_RANK"] = std::to_string(rank);
  }
  stray.erase("TORCHELASTIC_RUN_ID");
  const auto outcomes = run({"long", "--slow-ms", "2", "--stop-after", "1000"}, {job_a[0], job_a[1], stray});
  for (std::size_t rank = 0; rank < 2; ++rank) {
    INFO("job A's rank " << rank << " printed:\n" << outcomes[rank].out << "\nand logged:\n" << outcomes[rank].err);
    REQUIRE(outcomes[rank].exited(0));
    CHECK(outcomes[rank].out.ends_with("stopped after 1000\n"));
  }
  REQUIRE(outcomes[2].exited(3));
  const std::string store = "127.0.0.1:" + std::to_string(port);
  CHECK(std::regex_match(
      outcomes[2].out,
      std::regex("error dpipe::RendezvousError: DistributedReadingService \\(rank 1 of 3 under torchrun, rank 0 "
                 "serving the store at 127\\.0\\.0\\.1:[0-9]+\\): cannot meet the other ranks: TcpStore: the store "
                 "refused the connection: rank 1 of loader 'loader/0/' runs a world of 3 ranks with the fingerprint "
                 "([0-9a-f]{16}-[0-9a-f]{16}), but rank 0 of it a world of 2 ranks with the fingerprint \\1: another "
                 "job on this port\\? \\(give each job its own DPIPE_STORE_PORT or DPIPE_STORE_TOKEN\\) "
                 "\\(127\\.0\\.0\\.1:[0-9]+\\)\n")));
}

// A distributed trainer: 2 ranks x 2 worker processes, the epoch's length known before it starts,
// one checkpoint file for the job in the middle of an epoch, and a resume that continues exactly
// where each rank stopped.
//
// Start it the way a cluster starts trainers, one process per rank:
//   torchrun --no-python --nproc-per-node 2 ./dpipe_example_distributed
//   mpirun -np 2 ./dpipe_example_distributed
//   srun --ntasks 2 ./dpipe_example_distributed
// Started alone (no launcher variables), it starts its two ranks itself, as torchrun would.

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <dpipe/dpipe.hpp>

namespace {

using Batch = std::vector<int>;

// [loader]
/// Every rank builds the same loader: the service finds the rank in the launcher's environment,
/// gives each rank its shard and each worker its part of it, and ends every rank's epoch after
/// the same number of batches.
dpipe::DataLoader2<Batch> make_loader() {
  std::vector<int> ids(1000);
  std::iota(ids.begin(), ids.end(), 0);
  auto pipeline = dpipe::iter::from(std::move(ids))
                      .shuffle()          // the same order on every rank and worker...
                      .sharding_filter()  // ...of which each keeps instance worker + 2 * rank
                      .map([](int id) { return id * 2; })
                      .batch(16);
  return dpipe::DataLoader2<Batch>(
      pipeline, dpipe::SequentialReadingService(dpipe::DistributedReadingService(),
                                                dpipe::MultiProcessingReadingService({.num_workers = 2})));
}
// [loader]

/// Every batch of two epochs, from `loader`.
std::vector<Batch> two_epochs(dpipe::DataLoader2<Batch>& loader) {
  std::vector<Batch> batches;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (auto& batch : loader) batches.push_back(std::move(batch));
  }
  return batches;
}

int train(const dpipe::LaunchEnvironment& env) {
  const std::string checkpoint = "distributed-example.ckpt";
  auto uninterrupted = make_loader();
  uninterrupted.seed(2026);
  // Known before anything starts, for a learning-rate schedule: the batches every rank trains on
  // in an epoch (each worker batches its own shard; every rank ends with the shortest).
  const std::size_t steps = uninterrupted.epoch_length().value();
  const auto expected = two_epochs(uninterrupted);
  uninterrupted.shutdown();

  // [checkpoint]
  std::vector<Batch> trained;
  {
    auto loader = make_loader();
    loader.seed(2026);
    for (auto& batch : loader) trained.push_back(std::move(batch));  // epoch 1
    for (auto& batch : loader) {                                     // epoch 2, stopped after 7 batches
      trained.push_back(std::move(batch));
      if (trained.size() == steps + 7) break;
    }
    // Every rank calls it at the same step; rank 0 writes every rank's state into one file.
    loader.save_job_checkpoint(checkpoint);
  }
  auto resumed = make_loader();
  resumed.load_job_checkpoint(checkpoint);  // every rank calls it; rank 0 reads the file and hands out the parts
  for (auto& batch : resumed) trained.push_back(std::move(batch));  // the rest of epoch 2
  // [checkpoint]
  if (env.rank == 0) std::remove(checkpoint.c_str());

  const bool exact = trained == expected && expected.size() == 2 * steps;
  std::printf("rank %zu of %zu (%s): %zu batches in 2 epochs of %zu, checkpoint after %zu, resumed exactly: %s\n",
              env.rank, env.world_size, std::string(dpipe::launcher_name(env.launcher)).c_str(), expected.size(), steps,
              steps + 7, exact ? "yes" : "no");
  return exact ? 0 : 1;
}

/// Starts this program as ranks 0 and 1 of a job on this machine, with torchrun's variables.
int launch_two_ranks(const char* self) {
  std::vector<pid_t> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::execl("/proc/self/exe", self, static_cast<char*>(nullptr));
      std::perror("exec");
      ::_exit(127);
    }
    ranks.push_back(pid);
  }
  int failed = 0;
  for (const pid_t pid : ranks) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int /*argc*/, char** argv) {
  try {
    const dpipe::LaunchEnvironment env = dpipe::detect_launch_environment();
    if (env.launcher == dpipe::Launcher::kNone) return launch_two_ranks(argv[0]);
    return train(env);
  } catch (const dpipe::Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
}

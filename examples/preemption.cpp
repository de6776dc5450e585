// Checkpoint on preemption, the Slurm way: the scheduler sends SIGTERM to the whole job (the
// trainer and its worker processes) some time before it kills it. The trainer finishes the step it
// is in, saves a checkpoint, and exits; the job's next run resumes from it. The workers leave
// SIGTERM to the trainer, so they are still there for the checkpoint, whenever the trainer
// installed its handler. Here the trainer sends the SIGTERM to its own process group itself, after
// 25 steps, in place of a scheduler.

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

#include <dpipe/dpipe.hpp>

namespace {

dpipe::DataLoader2<std::vector<int>> make_loader() {
  std::vector<int> ids(20000);
  std::iota(ids.begin(), ids.end(), 0);
  auto pipeline = dpipe::iter::from(std::move(ids)).shuffle(1000).sharding_filter().batch(32);
  return dpipe::DataLoader2<std::vector<int>>(pipeline, dpipe::MultiProcessingReadingService({.num_workers = 2}));
}

// [handler]
volatile std::sig_atomic_t g_preempted = 0;

void on_preemption(int /*signal*/) { g_preempted = 1; }  // only a flag: the loop does the work
// [handler]

}  // namespace

int main() {
  setpgid(0, 0);  // a job of its own, so that the SIGTERM below reaches only this trainer and its workers
  const auto checkpoint = std::filesystem::temp_directory_path() / ("dpipe-preemption-" + std::to_string(getpid()));

  // [train]
  std::signal(SIGTERM, on_preemption);
  std::size_t steps = 0;
  {
    auto loader = make_loader();
    loader.seed(0);
    for (const auto& batch : loader) {
      (void)batch;  // train_step(batch)
      ++steps;
      if (steps == 25) kill(0, SIGTERM);  // the scheduler's notice (here: the trainer's own)
      if (g_preempted != 0) {             // the step is finished: save and stop
        dpipe::save_checkpoint_file(checkpoint, loader.state_dict());
        break;
      }
    }
  }  // the loader and its workers shut down; the job would exit here
  std::printf("preempted after %zu steps, checkpoint saved\n", steps);

  auto resumed = make_loader();  // the job's next run
  resumed.load_state_dict(dpipe::load_checkpoint_file(checkpoint));
  for (const auto& batch : resumed) {
    (void)batch;
    ++steps;
  }
  // [train]
  std::filesystem::remove(checkpoint);
  std::printf("resumed and finished the epoch: %zu steps in all\n", steps);
  // Each of the 2 workers batches its 10000 samples: 313 batches of up to 32 each.
  return steps == 2 * ((10000 + 31) / 32) ? 0 : 1;
}

// Elastic restore under the global order: a job of 2 ranks x 2 worker processes trains 2 epochs
// and is preempted in the middle of the second; the job comes back on 3 ranks x 1 worker, loads
// the checkpoint rank 0 wrote, and yields exactly the rest of the uninterrupted global stream.
//
// The ranks are threads of this process here (each with its own loader and its own connection
// to the store rank 0 serves), so that the example runs alone; a real job runs one process per
// rank under torchrun, Slurm or mpirun with the same code (see examples/distributed.cpp).

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <dpipe/dpipe.hpp>

namespace {

using Batch = std::vector<std::int64_t>;
constexpr std::uint16_t kStorePort = 29533;

// [global]
/// The same pipeline on every rank: 1000 samples in a new keyed permutation each epoch, decoded,
/// in steps of 10 positions. Its data depends on the seed alone, not on the job's shape.
dpipe::IterPipe<Batch> pipeline() {
  std::vector<std::int64_t> samples(1000);
  std::iota(samples.begin(), samples.end(), 0);
  return dpipe::global_order(std::move(samples)).map([](std::int64_t id) { return id * 3; }).batch(10);
}

/// Rank `rank` of a job of `world` ranks with `workers` worker processes each.
dpipe::DataLoader2<Batch> make_loader(std::size_t rank, std::size_t world, std::size_t workers, const char* job) {
  dpipe::DistributedOptions options;
  options.rendezvous.rank = rank;
  options.rendezvous.world_size = world;
  options.rendezvous.store_host = "127.0.0.1";
  options.rendezvous.store_port = kStorePort;
  options.rendezvous.token = job;
  return dpipe::DataLoader2<Batch>(
      pipeline(), dpipe::SequentialReadingService(dpipe::DistributedReadingService(options),
                                                  dpipe::MultiProcessingReadingService({.num_workers = workers})));
}
// [global]

/// Runs `body(rank)` on every rank of a world of `world`, each in a thread of its own.
template <class Body>
void run_ranks(std::size_t world, Body body) {
  std::vector<std::thread> ranks;
  for (std::size_t rank = 0; rank < world; ++rank) ranks.emplace_back(body, rank);
  for (auto& rank : ranks) rank.join();
}

/// The ranks' batches interleaved step by step: rank r's j-th batch is global step r + j * world.
std::vector<Batch> global_stream(const std::vector<std::vector<Batch>>& ranks) {
  std::vector<Batch> stream;
  for (std::size_t j = 0; j < ranks.front().size(); ++j) {
    for (const auto& rank : ranks) stream.push_back(rank.at(j));
  }
  return stream;
}

}  // namespace

int main() {
  // The uninterrupted job: 2 ranks x 2 workers, 2 epochs.
  std::vector<std::vector<std::vector<Batch>>> epochs(2, std::vector<std::vector<Batch>>(2));
  run_ranks(2, [&](std::size_t rank) {
    auto loader = make_loader(rank, 2, 2, "elastic-uninterrupted");
    loader.seed(2026);
    for (auto& epoch : epochs) {
      for (auto& batch : loader) epoch[rank].push_back(batch);
    }
  });
  const auto second_epoch = global_stream(epochs[1]);
  std::printf("uninterrupted: 2 ranks x 2 worker processes, 2 epochs of %zu batches\n", second_epoch.size());

  // [checkpoint]
  // The same job, preempted after 5 steps of the second epoch: every rank stops at the same step,
  // as a training loop does, and rank 0 writes the job's checkpoint.
  const std::string path = "elastic-example.ckpt";
  run_ranks(2, [&](std::size_t rank) {
    auto loader = make_loader(rank, 2, 2, "elastic-preempted");
    loader.seed(2026);
    for (auto& batch : loader) (void)batch;  // the first epoch
    int steps = 0;
    for (auto& batch : loader) {
      (void)batch;
      if (++steps == 5) break;
    }
    const auto state = loader.state_dict();
    if (rank == 0)
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(state.data()), static_cast<std::streamsize>(state.size()));
  });
  std::printf("checkpoint: rank 0 after 5 batches of epoch 2 (global step 10)\n");

  // The job comes back on 3 ranks x 1 worker: every rank loads rank 0's file.
  std::vector<std::vector<Batch>> resumed(3);
  run_ranks(3, [&](std::size_t rank) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> state(bytes.size());
    std::memcpy(state.data(), bytes.data(), bytes.size());
    auto loader = make_loader(rank, 3, 1, "elastic-resumed");
    loader.load_state_dict(state);
    for (auto& batch : loader) resumed[rank].push_back(batch);
  });
  // [checkpoint]
  std::remove(path.c_str());
  const auto rest = global_stream(resumed);
  std::printf("resumed: 3 ranks x 1 worker process, %zu batches\n", rest.size());
  const bool same = std::equal(rest.begin(), rest.end(), second_epoch.begin() + 10, second_epoch.end());
  std::printf("the resumed stream is the uninterrupted one: %s\n", same && rest.size() == 90 ? "yes" : "no");
  return same ? 0 : 1;
}

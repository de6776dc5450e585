#pragma once
// Global-order test jobs: a loader for any shape (in process, worker processes or threads, ranks of
// a distributed job as threads of this process over a real TcpStore), epochs read and checkpoints
// taken on every rank at the same step, and the interleaving of the ranks' outputs by step.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <dpipe/dpipe.hpp>

#include "support/free_port.hpp"

namespace dpipe::testing {

/// The shape of a job: `world` ranks (0: no distributed service) of `workers` workers of `kind` each
/// (0: in the rank's process).
struct JobShape {
  std::size_t world = 0;
  std::size_t workers = 0;
  WorkerKind kind = WorkerKind::kProcess;

  [[nodiscard]] std::string name() const {
    return fmt::format("{} rank(s) x {} worker {}", world, workers,
                       kind == WorkerKind::kThread ? "threads" : "processes");
  }
};

/// The loader of rank `rank` in a job of shape `shape` whose store listens on `port`.
template <class T>
std::unique_ptr<DataLoader2<T>> job_loader(const IterPipe<T>& pipe, const JobShape& shape, std::size_t rank,
                                           std::uint16_t port, const std::string& token) {
  MultiProcessingOptions workers;
  workers.num_workers = shape.workers;
  workers.worker_kind = shape.kind;
  if (shape.world == 0) {
    if (shape.workers == 0) return std::make_unique<DataLoader2<T>>(pipe);
    return std::make_unique<DataLoader2<T>>(pipe, MultiProcessingReadingService(workers));
  }
  DistributedOptions options;
  options.timeout = std::chrono::seconds(60);
  options.rendezvous.rank = rank;
  options.rendezvous.world_size = shape.world;
  options.rendezvous.store_host = "127.0.0.1";
  options.rendezvous.store_port = port;
  options.rendezvous.token = token;
  options.name = token;
  const DistributedReadingService distributed(options);
  if (shape.workers == 0) return std::make_unique<DataLoader2<T>>(pipe, distributed);
  return std::make_unique<DataLoader2<T>>(
      pipe, SequentialReadingService(distributed, MultiProcessingReadingService(workers)));
}

/// Every element of the loader's next epoch.
template <class T>
std::vector<T> read_epoch(DataLoader2<T>& loader) {
  std::vector<T> out;
  for (auto& element : loader) out.push_back(element);
  return out;
}

/// What every rank of a job did: the elements of each epoch, and rank 0's checkpoint if one was taken.
template <class T>
struct JobRun {
  std::vector<std::vector<std::vector<T>>> ranks;  // [rank][epoch][element]
  std::vector<std::byte> checkpoint;               // rank 0's, after `stop_after` elements of the last epoch
};

/// Runs `epochs` epochs of `pipe` (seeded `seed`) in a job of shape `shape`, restoring `restore`
/// first when given; with `stop_after`, every rank stops after that many elements of the last epoch
/// and rank 0 saves its state.
template <class T>
JobRun<T> run_job(const std::function<IterPipe<T>()>& make_pipe, const JobShape& shape, std::uint64_t seed,
                  std::size_t epochs, std::optional<std::size_t> stop_after = std::nullopt,
                  const std::vector<std::byte>& restore = {}) {
  static int jobs = 0;
  const std::string token = fmt::format("global-{}", ++jobs);
  const std::size_t ranks = shape.world == 0 ? 1 : shape.world;
  const std::uint16_t port = shape.world == 0 ? 0 : free_port();
  JobRun<T> run;
  run.ranks.resize(ranks);
  std::vector<std::string> errors(ranks);
  const auto body = [&](std::size_t rank) {
    try {
      auto loader = job_loader(make_pipe(), shape, rank, port, token);
      loader->seed(seed);
      if (!restore.empty()) loader->load_state_dict(restore);
      for (std::size_t e = 0; e < epochs; ++e) {
        auto& out = run.ranks[rank].emplace_back();
        const bool stops = e + 1 == epochs && stop_after.has_value();
        auto it = loader->begin();  // the epoch starts: a checkpoint after 0 elements is inside it
        while ((!stops || out.size() < *stop_after) && it != loader->end()) {
          out.push_back(*it);
          ++it;
        }
        if (stops) {
          auto state = loader->state_dict();
          if (rank == 0) run.checkpoint = std::move(state);
        }
      }
    } catch (const std::exception& error) {
      errors[rank] = error.what();
    }
  };
  if (ranks == 1) {
    body(0);
  } else {
    std::vector<std::thread> threads;
    for (std::size_t rank = 0; rank < ranks; ++rank) threads.emplace_back(body, rank);
    for (auto& thread : threads) thread.join();
  }
  for (std::size_t rank = 0; rank < ranks; ++rank) {
    if (!errors[rank].empty()) throw std::runtime_error(fmt::format("rank {}: {}", rank, errors[rank]));
  }
  return run;
}

/// The ranks' steps of epoch `epoch` interleaved: rank r's j-th step is global step r + j * world.
template <class T>
std::vector<T> interleaved(const JobRun<T>& run, std::size_t epoch) {
  std::vector<T> out;
  for (std::size_t j = 0;; ++j) {
    bool any = false;
    for (const auto& rank : run.ranks) {
      if (j < rank[epoch].size()) {
        out.push_back(rank[epoch][j]);
        any = true;
      }
    }
    if (!any) return out;
  }
}

}  // namespace dpipe::testing

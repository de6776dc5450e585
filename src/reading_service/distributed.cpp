// DistributedReadingService: sharding by rank, rank 0's seed, fullsync, and checkpoints that
// know their rank.

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/core/checkpoint_schema.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/root_ops.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/global/global_epoch.hpp>
#include <dpipe/global/sampled.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/pipeline_record.hpp>
#include <dpipe/graph/settings.hpp>
#include <dpipe/reading_service/distributed.hpp>

#include "core/fnv.hpp"
#include "reading_service/distributed/rank_group.hpp"

namespace dpipe {
namespace {

/// The key prefix of this process's next loader named `name` for rank `rank` of `world_size`:
/// "<name>/<k>/", k counting the loaders of that name, rank and world size this process started
/// ("loader" when unnamed), so that a loader built again under a name (a validation loader each
/// epoch) never meets the rounds of the one before. (Counting per rank lets one process play
/// several ranks, as tests do; per world size keeps a loader of this process alone, which every
/// process may build as rank 0 of 1, from shifting the count of the job's loaders.)
std::string next_loader_prefix(const std::string& name, const LaunchEnvironment& environment) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, std::size_t, std::size_t>, std::uint64_t> started;
  const std::lock_guard lock(mutex);
  return fmt::format("{}/{}/", name, started[{name, environment.rank, environment.world_size}]++);
}

/// What the ranks compare at their first round, but the epoch: fingerprints of `graph` (before
/// sharding: its nodes, types and settings) and of the options that every rank must share.
detail::dist::RunIdentity identify(const DataPipePtr& graph, const DistributedOptions& options) {
  detail::Fnv1a service;
  service.add(std::uint64_t{options.fullsync_block});
  service.add(static_cast<std::uint64_t>(options.timeout.count()));
  return {.epoch = 0,
          .restored = false,
          .pipeline = fmt::format("{:016x}", detail::fnv1a(to_bytes(graph::record_pipeline(graph)))),
          .service = fmt::format("{:016x}", service.value())};
}

}  // namespace

DistributedReadingService::DistributedReadingService(DistributedOptions options) : options_(std::move(options)) {
  if (options_.timeout <= std::chrono::milliseconds(0) || options_.timeout > std::chrono::hours(24 * 365)) {
    DPIPE_THROW(InvalidArgument,
                "DistributedReadingService: the timeout must be positive and at most a year, got {} ms",
                options_.timeout.count());
  }
}

DistributedReadingService::DistributedReadingService(const DistributedReadingService& other)
    : ReadingService(other), options_(other.options_) {}

DistributedReadingService::~DistributedReadingService() { finalize(); }

LaunchEnvironment DistributedReadingService::detect() const {
  RendezvousOptions rendezvous = options_.rendezvous;
  // The trainer's own store needs no host: say so, so that a launcher without one is complete.
  if (options_.store && !rendezvous.store_host) rendezvous.store_host = "(the trainer's store)";
  return detect_launch_environment(rendezvous);
}

DataPipePtr DistributedReadingService::initialize(DataPipePtr graph) {
  if (root_) DPIPE_THROW(UsageError, "DistributedReadingService: initialize() was already called");
  const LaunchEnvironment environment = detect();
  group_ = std::make_shared<detail::dist::RankGroup>(
      environment, options_, next_loader_prefix(options_.name.empty() ? "loader" : options_.name, environment),
      identify(graph, options_));
  graph::apply_sharding(graph, environment.world_size, environment.rank, ShardingPriority::kDistributed);
  // A global order's end yields the same number of steps on every rank: no fullsync rounds.
  if (dynamic_cast<RankSyncDataPipe*>(graph.get()) == nullptr &&
      dynamic_cast<GlobalOrderEnd*>(graph.get()) == nullptr) {
    graph = apply_typed_op<ops::AppendFullSync>(graph, options_.timeout);
  }
  const auto syncing = graph::find_dps<RankSyncDataPipe>(graph::traverse_dps(graph));
  for (std::size_t i = 0; i < syncing.size(); ++i) syncing[i]->join_ranks(group_->fullsync(i));
  root_ = graph;
  return graph;
}

std::optional<std::size_t> DistributedReadingService::epoch_length(const DataPipePtr& graph) const {
  const LaunchEnvironment environment = detect();
  std::optional<std::size_t> least;
  for (std::size_t rank = 0; rank < environment.world_size; ++rank) {
    const auto length = graph::sharded_length(graph, environment.world_size, rank, ShardingPriority::kDistributed);
    if (!length) return std::nullopt;
    least = least ? std::min(*least, *length) : *length;
  }
  return least;
}

GraphFunction DistributedReadingService::initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn) {
  if (!root_) DPIPE_THROW(UsageError, "DistributedReadingService: initialize() must be called first");
  const std::uint64_t shared = group_->share_seed(seeds.generate_shared_seed(), epochs_++);
  seeds.seed(shared);
  seeds.spawn(group_->environment().rank, /*inplace=*/true);
  // A global order learns the world size, and one keyed by the ranks' own draws (no
  // DataLoader2::seed()) takes rank 0's.
  if (auto global = graph::find_global_epoch(root_)) {
    global->world = group_->environment().world_size;
    if (!global->user_seeded) global->key = sample_seed(shared, 0);
    graph::set_global_epoch(root_, *global);
  }
  graph::set_graph_random_seed(root_, seeds);
  return iter_reset_fn;
}

void DistributedReadingService::finalize() {
  if (group_) group_->leave();
}

void DistributedReadingService::checkpoint(StateWriter& writer) {
  const LaunchEnvironment environment = group_ ? group_->environment() : detect();
  writer.write(checkpoint_schema::ranks::kRank, std::uint64_t{environment.rank});
  writer.write(checkpoint_schema::ranks::kWorldSize, std::uint64_t{environment.world_size});
  writer.write(checkpoint_schema::ranks::kEpochs, epochs_);
}

DataPipePtr DistributedReadingService::restore(DataPipePtr graph, const StateReader& reader) {
  const auto rank = reader.read<std::uint64_t>(checkpoint_schema::ranks::kRank);
  const auto world_size = reader.read<std::uint64_t>(checkpoint_schema::ranks::kWorldSize);
  const auto epochs = reader.read<std::uint64_t>(checkpoint_schema::ranks::kEpochs);
  const LaunchEnvironment here = detect();
  if (rank != here.rank || world_size != here.world_size) {
    DPIPE_THROW(StateError,
                "the checkpoint was saved by rank {} of a world of {}; this process is rank {} of a world of {}: "
                "restore each rank from its own checkpoint, on the same world size",
                rank, world_size, here.rank, here.world_size);
  }
  graph = initialize(std::move(graph));
  epochs_ = epochs;
  group_->restored(epochs);
  return graph;
}

const LaunchEnvironment& DistributedReadingService::environment() const {
  if (!group_) DPIPE_THROW(UsageError, "DistributedReadingService: initialize() must be called first");
  return group_->environment();
}

}  // namespace dpipe

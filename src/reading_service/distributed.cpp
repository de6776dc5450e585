// DistributedReadingService: sharding by rank, rank 0's seed, fullsync, and checkpoints that
// know their rank.

#include <algorithm>
#include <exception>
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
#include <dpipe/reading_service/sequential.hpp>
#include <dpipe/serialization/serializer.hpp>

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

detail::dist::RankGroup& DistributedReadingService::meet(const DataPipePtr& graph) {
  if (!group_) {
    const LaunchEnvironment environment = detect();
    group_ = std::make_shared<detail::dist::RankGroup>(
        environment, options_, next_loader_prefix(options_.name.empty() ? "loader" : options_.name, environment),
        identify(graph, options_));
  }
  return *group_;
}

LaunchEnvironment DistributedReadingService::detect() const {
  RendezvousOptions rendezvous = options_.rendezvous;
  // The trainer's own store needs no host: say so, so that a launcher without one is complete.
  if (options_.store && !rendezvous.store_host) rendezvous.store_host = "(the trainer's store)";
  return detect_launch_environment(rendezvous);
}

DataPipePtr DistributedReadingService::initialize(DataPipePtr graph) {
  if (root_) DPIPE_THROW(UsageError, "DistributedReadingService: initialize() was already called");
  const LaunchEnvironment environment = meet(graph).environment();
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
  return epoch_length_before(
      graph, [](const DataPipePtr& shard) { return dynamic_cast<const IterDataPipeBase&>(*shard).length(); });
}

std::optional<std::size_t> DistributedReadingService::epoch_length_before(const DataPipePtr& graph,
                                                                          const EpochLengthFunction& rest) const {
  const LaunchEnvironment environment = detect();
  std::optional<std::size_t> least;
  for (std::size_t rank = 0; rank < environment.world_size; ++rank) {
    const DataPipePtr shard = graph::clone(graph);
    graph::apply_sharding(shard, environment.world_size, rank, ShardingPriority::kDistributed);
    const auto length = rest(shard);
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

namespace {

/// What rank 0 tells the others after its part of a job checkpoint's collective: empty, or what
/// went wrong.
std::string outcome_of(const std::function<void()>& part, std::exception_ptr& failure) {
  try {
    part();
    return {};
  } catch (const std::exception& error) {
    failure = std::current_exception();
    return error.what();
  }
}

/// Raises rank 0's failure: its own exception on rank 0, a StateError naming rank 0 elsewhere.
void raise_outcome(const std::vector<std::vector<std::byte>>& outcomes, const std::exception_ptr& failure,
                   const detail::dist::RankGroup& group, const std::string& what) {
  if (failure) std::rethrow_exception(failure);
  const auto reason = from_bytes<std::string>(outcomes.front());
  if (!reason.empty()) {
    DPIPE_THROW(StateError, "DistributedReadingService ({}): {}: rank 0 failed: {}", group.where(), what, reason);
  }
}

}  // namespace

void DistributedReadingService::gather_states(const DataPipePtr& graph, std::span<const std::byte> state,
                                              const std::function<void(const RankStates&)>& write) {
  auto& group = meet(graph);
  const LaunchEnvironment& environment = group.environment();
  if (environment.world_size == 1) {
    write(RankStates{std::vector<std::byte>(state.begin(), state.end())});
    return;
  }
  const std::string what = "saving the job's checkpoint";
  const std::string round = fmt::format("job_checkpoint/{}", gathers_++);
  group.put(fmt::format("{}/{}", round, environment.rank), state, what);
  (void)group.exchange(round + "/stored", to_bytes(std::uint64_t{state.size()}), round + "/stored", options_.timeout,
                       what);  // every rank's state is in the store
  std::exception_ptr failure;
  std::string outcome;
  if (environment.rank == 0) {
    outcome = outcome_of(
        [&] {
          RankStates states;
          for (std::size_t rank = 0; rank < environment.world_size; ++rank) {
            states.push_back(group.take(fmt::format("{}/{}", round, rank), what));
          }
          write(states);
        },
        failure);
  }
  const auto outcomes =
      group.exchange(round + "/written", to_bytes(outcome), round + "/written", options_.timeout, what);
  raise_outcome(outcomes, failure, group, what);
}

std::vector<std::byte> DistributedReadingService::scatter_states(
    const DataPipePtr& graph, const std::function<RankStates(std::size_t world_size)>& read) {
  auto& group = meet(graph);
  const LaunchEnvironment& environment = group.environment();
  if (environment.world_size == 1) return read(1).at(0);
  group.restored(0);  // the ranks meet as restored ones: a fresh rank beside them is refused at once
  const std::string what = "restoring the job's checkpoint";
  const std::string round = "job_restore";  // a loader restores once, before its first round
  std::vector<std::byte> own;
  std::exception_ptr failure;
  std::string outcome;
  if (environment.rank == 0) {
    outcome = outcome_of(
        [&] {
          RankStates states = read(environment.world_size);
          for (std::size_t rank = 1; rank < environment.world_size; ++rank) {
            group.put(fmt::format("{}/{}", round, rank), states.at(rank), what);
          }
          own = std::move(states.at(0));
        },
        failure);
  }
  const auto outcomes = group.exchange(round + "/ready", to_bytes(outcome), round + "/ready", options_.timeout, what);
  raise_outcome(outcomes, failure, group, what);
  if (environment.rank != 0) own = group.take(fmt::format("{}/{}", round, environment.rank), what);
  // Rank 0 may leave only once every rank holds its state (its store goes with it).
  (void)group.exchange(round + "/taken", to_bytes(std::uint64_t{own.size()}), round + "/taken", options_.timeout, what);
  return own;
}

DistributedReadingService* find_distributed_service(ReadingServiceInterface* service) {
  if (auto* distributed = dynamic_cast<DistributedReadingService*>(service)) return distributed;
  if (auto* sequence = dynamic_cast<SequentialReadingService*>(service)) {
    for (std::size_t i = 0; i < sequence->size(); ++i) {
      if (auto* distributed = find_distributed_service(&sequence->service(i))) return distributed;
    }
  }
  return nullptr;
}

const LaunchEnvironment& DistributedReadingService::environment() const {
  if (!group_) DPIPE_THROW(UsageError, "DistributedReadingService: initialize() must be called first");
  return group_->environment();
}

}  // namespace dpipe

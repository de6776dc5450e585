// MultiProcessingReadingService: splitting the graph, and the service's protocol on top of
// ProcessGroup.

#include <algorithm>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/core/checkpoint_schema.hpp>
#include <dpipe/core/element_ops.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/global/global_epoch.hpp>
#include <dpipe/graph/background.hpp>
#include <dpipe/graph/dispatch.hpp>
#include <dpipe/graph/dot.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/linter.hpp>
#include <dpipe/graph/settings.hpp>
#include <dpipe/reading_service/multiprocessing.hpp>

#include "reading_service/multiprocessing/process_group.hpp"

namespace dpipe {
namespace {

[[noreturn]] void throw_no_workers(const char* hook) {
  DPIPE_THROW(UsageError,
              "If you would like to use `{}` with `MultiProcessingReadingService`, please use more than 0 worker.",
              hook);
}

/// Throws InvalidArgument unless the elements of `node` can cross a process boundary.
void require_encodable(const DataPipePtr& node, const char* role) {
  if (find_typed_op<ops::Encode>(*node) != nullptr) return;
  DPIPE_THROW(InvalidArgument,
              "MultiProcessingReadingService: the elements of {} ({}, {}) cannot cross a process boundary: declare "
              "DPIPE_FIELDS(...) in the type or specialize dpipe::Serializer (see docs/reading-services.md)",
              node->label(), role, node->element_type());
}

/// How the service splits a graph among its processes.
struct WorkerSplit {
  DataPipePtr graph;        // the graph, with `placeholder` in place of `dispatched`
  DataPipePtr dispatched;   // the dispatching process's branch, or null
  DataPipePtr placeholder;  // where the dispatched elements enter the workers' branch, or null
  DataPipePtr branch;       // the replicable branch each worker runs a copy of
};

WorkerSplit split_for_workers(DataPipePtr graph) {
  WorkerSplit split;
  split.graph = std::move(graph);
  auto traversed = graph::traverse_dps(split.graph);
  if (auto dispatched = graph::find_lca_round_robin_sharding_dp(traversed)) {
    split.dispatched = dispatched;
    split.placeholder = apply_typed_op<ops::Placeholder>(dispatched);
    traversed = graph::replace_dp(traversed, dispatched, split.placeholder);
    split.graph = traversed.root();
  }
  const auto branches = graph::find_replicable_branches(traversed);
  if (branches.size() != 1) {
    DPIPE_THROW(InvalidArgument, "MultiProcessingReadingService only supports single replicable branch currently");
  }
  split.branch = branches.front();
  return split;
}

/// How many of `length` elements dealt round robin to `n` takers the taker `i` receives.
std::size_t round_robin_share(std::size_t length, std::size_t n, std::size_t i) {
  return length / n + (i < length % n ? 1 : 0);
}

/// A placeholder for `node` that reports `length`.
DataPipePtr stand_in(const DataPipePtr& node, std::optional<std::size_t> length) {
  auto placeholder = apply_typed_op<ops::Placeholder>(node);
  dynamic_cast<detail::PlaceholderTag&>(*placeholder).set_stand_in_length(length);
  return placeholder;
}

std::optional<std::size_t> length_of(const DataPipePtr& root) {
  return dynamic_cast<const IterDataPipeBase&>(*root).length();
}

}  // namespace

MultiProcessingReadingService::MultiProcessingReadingService(MultiProcessingOptions options)
    : options_(std::move(options)) {
  if (options_.num_workers == 0) log_warning("Please use `InProcessReadingService` for num_workers=0");
}

MultiProcessingReadingService::MultiProcessingReadingService(const MultiProcessingReadingService& other)
    : ReadingService(other), options_(other.options_) {}

MultiProcessingReadingService::~MultiProcessingReadingService() { finalize(); }

std::string MultiProcessingReadingService::describe() const {
  return fmt::format("{} with {} worker processes", ReadingService::describe(), options_.num_workers);
}

DataPipePtr MultiProcessingReadingService::initialize(DataPipePtr graph) { return start(std::move(graph), nullptr); }

DataPipePtr MultiProcessingReadingService::start(DataPipePtr graph, const detail::mp::GroupState* saved) {
  if (end_) DPIPE_THROW(UsageError, "MultiProcessingReadingService: initialize() was already called");
  if (options_.pin_memory && options_.host_allocator != nullptr) {
    DPIPE_THROW(
        InvalidArgument,
        "MultiProcessingReadingService: pin_memory and host_allocator were both set; pass a pinned allocator as "
        "host_allocator, or set pin_memory alone");
  }
  if (options_.tensor_arena_bytes.value_or(0) != 0 && (options_.pin_memory || options_.host_allocator != nullptr)) {
    DPIPE_THROW(InvalidArgument,
                "MultiProcessingReadingService: tensor_arena_bytes was set with {}, whose memory the trainer's tensors "
                "must be in; leave it unset",
                options_.pin_memory ? "pin_memory" : "host_allocator");
  }
  allocator_ = options_.pin_memory ? cuda_host_allocator() : options_.host_allocator;
  if (options_.num_workers == 0) {
    graph::apply_sharding(graph, 1, 0, ShardingPriority::kMultiprocessing);
    if (options_.worker_init_fn) graph = options_.worker_init_fn(std::move(graph), WorkerInfo{1, 0});
    end_ = graph;
    return graph;
  }
  const bool threads = options_.worker_kind == WorkerKind::kThread;
  // Nothing of dpipe's may run in another thread while forking (and the workers run copies of the
  // branch): stop the prefetch threads.
  graph::BackgroundStop(graph).keep_stopped();
  if (!graph::has_sharding(graph)) {
    log_warning(
        "MultiProcessingReadingService: the pipeline has no sharding_filter or sharding_round_robin_dispatch: each of "
        "the {} worker {} yields the whole dataset",
        options_.num_workers, threads ? "threads" : "processes");
  }
  shadow_ = graph::clone(graph);
  const auto syncing = graph::find_dps<RankSyncDataPipe>(graph::traverse_dps(graph));
  distributed_ = graph::sharded_for(graph, ShardingPriority::kDistributed) ||
                 std::ranges::any_of(syncing, [](const auto& node) { return node->joined(); });

  detail::mp::GroupPlan plan;
  plan.config = detail::mp::GroupConfig{
      .num_workers = options_.num_workers,
      .worker_prefetch_cnt = options_.worker_prefetch_cnt,
      .main_prefetch_cnt = options_.main_prefetch_cnt,
      .queue_bytes = options_.queue_bytes,
      .timeout = options_.timeout,
      .stall_warning = options_.stall_warning,
      .worker_init_fn = options_.worker_init_fn,
      .worker_reset_fn = options_.worker_reset_fn,
      .threads = threads,
      .host_allocator = allocator_,
      .tensor_arena_bytes = threads || allocator_ != nullptr
                                ? 0
                                : options_.tensor_arena_bytes.value_or(std::size_t{4} * options_.queue_bytes),
      .small_elements_bytes = graph::find_global_end(graph) != nullptr ? detail::mp::kGlobalOrderSmallElementsBytes
                                                                       : detail::mp::kSmallElementsBytes};
  auto split = split_for_workers(std::move(graph));
  if (!threads) {
    if (split.dispatched) require_encodable(split.dispatched, "the output of the dispatching process");
    require_encodable(split.branch, "the output of the worker processes");
  }
  graph = split.graph;
  plan.dispatched = split.dispatched;
  plan.branch = split.branch;

  if (saved != nullptr && saved->dispatcher.has_value() != (plan.dispatched != nullptr)) {
    DPIPE_THROW(StateError, "the checkpoint was saved {} a dispatching process; this pipeline runs {}",
                saved->dispatcher ? "with" : "without", plan.dispatched ? "one" : "none");
  }
  group_ = std::make_shared<detail::mp::ProcessGroup>(plan, saved);
  branch_ = plan.branch;
  dispatched_ = plan.dispatched;
  placeholder_ = split.placeholder;

  merge_ = plan.passing().receiver(branch_, group_->merge(), "merge_workers");
  end_ = branch_ == graph ? merge_ : graph::replace_dp(graph::traverse_dps(graph), branch_, merge_).root();
  return end_;
}

std::optional<std::size_t> MultiProcessingReadingService::epoch_length(const DataPipePtr& graph) const {
  if (options_.worker_init_fn || options_.worker_reset_fn) return std::nullopt;  // they may reshape the graph
  const std::size_t workers = options_.num_workers;
  if (workers == 0) return graph::sharded_length(graph, 1, 0, ShardingPriority::kMultiprocessing);
  const auto split = split_for_workers(graph::clone(graph));
  std::optional<std::size_t> dispatched;
  if (split.dispatched && !(dispatched = length_of(split.dispatched))) return std::nullopt;
  std::size_t merged = 0;  // what the workers yield together
  for (std::size_t worker = 0; worker < workers; ++worker) {
    if (split.placeholder) {
      dynamic_cast<detail::PlaceholderTag&>(*split.placeholder)
          .set_stand_in_length(round_robin_share(*dispatched, workers, worker));
    }
    const auto share = graph::sharded_length(split.branch, workers, worker, ShardingPriority::kMultiprocessing);
    if (!share) return std::nullopt;
    merged += *share;
  }
  if (split.branch == split.graph) return merged;
  // The nodes after the branch run in this process, over the merged stream.
  return length_of(
      graph::replace_dp(graph::traverse_dps(split.graph), split.branch, stand_in(split.branch, merged)).root());
}

GraphFunction MultiProcessingReadingService::initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn) {
  if (!end_) DPIPE_THROW(UsageError, "MultiProcessingReadingService: initialize() must be called first");
  if (options_.num_workers == 0) {
    graph::set_graph_random_seed(end_, seeds);
    return iter_reset_fn;
  }
  if (iter_reset_fn) {
    DPIPE_THROW(NotSupportedError,
                "MultiProcessingReadingService cannot send a function to worker processes that are already running: "
                "change the graph per epoch with worker_reset_fn instead");
  }
  stop_main_background();
  if (distributed_) {
    // A distributed service before this one reseeds `seeds` every epoch: seed as torchdata does,
    // the main process's nodes from `seeds`, then each worker from a spawn of what is left.
    graph::set_graph_random_seed(end_, seeds);
    group_->reset(seeds, /*reseeded=*/true, graph::find_global_epoch(end_));
  } else {
    const SeedGenerator epoch = seeds;
    graph::set_graph_random_seed(shadow_, seeds);  // advances `seeds` exactly as an in-process epoch does
    SeedGenerator main_seeds = epoch;
    graph::set_graph_random_seed(end_, main_seeds);  // the nodes that stay in the main process
    group_->reset(epoch, /*reseeded=*/false, graph::find_global_epoch(end_));
  }
  paused_ = false;
  leave_main_background_stopped();  // the loader's reset of the root starts the new epoch's threads
  return {};
}

void MultiProcessingReadingService::finalize() {
  if (!group_) return;
  // Threads of the main process's nodes (a prefetch after a fullsync) may wait for a worker:
  // release them, stop them, then end the workers.
  group_->interrupt();
  stop_main_background();
  group_->stop();
  group_.reset();
  leave_main_background_stopped();  // nothing may read the workers any more
}

void MultiProcessingReadingService::stop_main_background() {
  // Afresh every time: a node restarts its thread when it is read or reset (a new epoch), whatever
  // stopped it before.
  auto stopped = std::make_unique<graph::BackgroundStop>(end_);
  leave_main_background_stopped();
  main_stopped_ = std::move(stopped);
}

void MultiProcessingReadingService::restart_main_background() { main_stopped_.reset(); }

void MultiProcessingReadingService::leave_main_background_stopped() noexcept {
  if (main_stopped_) main_stopped_->keep_stopped();
  main_stopped_.reset();
}

GraphFunction MultiProcessingReadingService::pause(GraphFunction pause_fn) {
  if (options_.num_workers == 0) throw_no_workers("pause");
  if (pause_fn) DPIPE_THROW(NotSupportedError, "MultiProcessingReadingService cannot send pause_fn to its workers");
  if (!group_) return {};
  stop_main_background();
  group_->pause();
  paused_ = true;
  return {};
}

GraphFunction MultiProcessingReadingService::resume(GraphFunction resume_fn) {
  if (options_.num_workers == 0) throw_no_workers("resume");
  if (resume_fn) DPIPE_THROW(NotSupportedError, "MultiProcessingReadingService cannot send resume_fn to its workers");
  if (!group_) return {};
  group_->resume();
  restart_main_background();
  paused_ = false;
  return {};
}

GraphFunction MultiProcessingReadingService::limit(std::optional<std::size_t> /*num_batches*/, GraphFunction limit_fn) {
  // As in torchdata, only a limit_fn acts; DataLoader2 counts the elements itself.
  if (limit_fn) DPIPE_THROW(NotSupportedError, "MultiProcessingReadingService cannot send limit_fn to its workers");
  return {};
}

void MultiProcessingReadingService::checkpoint(StateWriter& writer) {
  writer.write(checkpoint_schema::workers::kWorkers, std::uint64_t{options_.num_workers});
  writer.write(checkpoint_schema::workers::kStarted, group_ != nullptr);
  if (!group_) return;
  stop_main_background();
  const detail::mp::GroupState state = group_->checkpoint();
  writer.write(checkpoint_schema::workers::kGeneration, state.generation);
  for (std::size_t w = 0; w < state.workers.size(); ++w) {
    writer.store().merge(StateStore::from_bytes(state.workers[w]),
                         writer.name() + "/" + checkpoint_schema::workers::worker(w));
  }
  if (state.dispatcher) {
    writer.store().merge(StateStore::from_bytes(*state.dispatcher),
                         writer.name() + "/" + std::string(checkpoint_schema::workers::kDispatcher));
  }
}

void MultiProcessingReadingService::resume_after_checkpoint() {
  if (!group_ || paused_) return;
  group_->resume();
  restart_main_background();
}

DataPipePtr MultiProcessingReadingService::restore(DataPipePtr graph, const StateReader& reader) {
  const auto workers = reader.read<std::uint64_t>(checkpoint_schema::workers::kWorkers);
  if (workers != options_.num_workers) {
    DPIPE_THROW(StateError,
                "the checkpoint was saved with {} worker processes; this MultiProcessingReadingService has {}: "
                "restore it with the same num_workers",
                workers, options_.num_workers);
  }
  if (!reader.read<bool>(checkpoint_schema::workers::kStarted)) return initialize(std::move(graph));
  detail::mp::GroupState state;
  state.generation = reader.read<std::uint64_t>(checkpoint_schema::workers::kGeneration);
  for (std::size_t w = 0; w < options_.num_workers; ++w) {
    state.workers.push_back(
        reader.store().subset(reader.name() + "/" + checkpoint_schema::workers::worker(w)).to_bytes());
  }
  auto dispatcher = reader.store().subset(reader.name() + "/" + std::string(checkpoint_schema::workers::kDispatcher));
  if (!dispatcher.empty()) state.dispatcher = dispatcher.to_bytes();
  return start(std::move(graph), &state);
}

std::string MultiProcessingReadingService::to_dot() const {
  if (!end_) return {};
  graph::DataPipeGraph picture;
  graph::DotOptions options;
  options.title = "MultiProcessingReadingService";
  const auto add = [&](const DataPipePtr& root, std::string label) {
    auto part = graph::traverse_dps(root);
    graph::DotCluster cluster{std::move(label), {}};
    for (const auto& node : graph::list_dps(part)) cluster.node_ids.push_back(node->id());
    options.clusters.push_back(std::move(cluster));
    for (auto& entry : part.entries) picture.entries.push_back(std::move(entry));
  };
  add(end_, "main process");
  if (options_.num_workers == 0) return graph::to_dot(picture, options);
  const bool threads = options_.worker_kind == WorkerKind::kThread;
  add(branch_, fmt::format("{} worker {} (each runs a copy)", options_.num_workers, threads ? "threads" : "processes"));
  options.links.push_back({branch_->id(), merge_->id(), threads ? "moved" : "shared memory"});
  if (dispatched_) {
    add(dispatched_, threads ? "dispatching thread" : "dispatching process");
    options.links.push_back({dispatched_->id(), placeholder_->id(), "element j to worker j mod N"});
  }
  return graph::to_dot(picture, options);
}

std::vector<pid_t> MultiProcessingReadingService::worker_pids() const {
  return group_ ? group_->worker_pids() : std::vector<pid_t>{};
}

std::optional<pid_t> MultiProcessingReadingService::dispatcher_pid() const {
  return group_ ? group_->dispatcher_pid() : std::nullopt;
}

}  // namespace dpipe

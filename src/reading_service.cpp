// The reading-service interfaces' defaults, InProcessReadingService, SequentialReadingService and
// the Shuffle adapter.

#include <dpipe/adapter.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/settings.hpp>
#include <dpipe/reading_service/in_process.hpp>
#include <dpipe/reading_service/sequential.hpp>

namespace dpipe {
namespace {

[[noreturn]] void throw_unsupported(const char* hook) {
  DPIPE_THROW(NotSupportedError, "this reading service does not support `{}`", hook);
}

}  // namespace

// --- ReadingServiceInterface ----------------------------------------------------------------------

GraphFunction ReadingServiceInterface::initialize_iteration(SeedGenerator& /*seeds*/, GraphFunction /*iter_reset_fn*/) {
  return {};
}
GraphFunction ReadingServiceInterface::pause(GraphFunction /*pause_fn*/) { throw_unsupported("pause"); }
GraphFunction ReadingServiceInterface::resume(GraphFunction /*resume_fn*/) { throw_unsupported("resume"); }
GraphFunction ReadingServiceInterface::limit(std::optional<std::size_t> /*num_batches*/, GraphFunction /*limit_fn*/) {
  throw_unsupported("limit");
}

// --- InProcessReadingService ------------------------------------------------------------------------

InProcessReadingService::InProcessReadingService(std::size_t prefetch_cnt, InitFunction init_fn, ResetFunction reset_fn)
    : prefetch_cnt_(prefetch_cnt), init_fn_(std::move(init_fn)), reset_fn_(std::move(reset_fn)) {}

DataPipePtr InProcessReadingService::initialize(DataPipePtr graph) {
  graph::apply_sharding(graph, 1, 0, ShardingPriority::kMultiprocessing);
  if (init_fn_) graph = init_fn_(std::move(graph), WorkerInfo{1, 0});
  if (prefetch_cnt_ > 0) graph = graph->make_prefetch(prefetch_cnt_);
  end_ = graph;
  return graph;
}

GraphFunction InProcessReadingService::initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn) {
  graph::set_graph_random_seed(end_, seeds);
  if (iter_reset_fn) end_ = iter_reset_fn(end_);
  if (reset_fn_) end_ = reset_fn_(end_, WorkerInfo{1, 0}, seeds);
  DataPipePtr end = end_;
  return [end](DataPipePtr) { return end; };
}

GraphFunction InProcessReadingService::pause(GraphFunction pause_fn) {
  for (const auto& node : graph::list_dps(graph::traverse_dps(end_))) node->pause();
  if (pause_fn) end_ = pause_fn(end_);
  DataPipePtr end = end_;
  return [end](DataPipePtr) { return end; };
}

GraphFunction InProcessReadingService::resume(GraphFunction resume_fn) {
  if (resume_fn) end_ = resume_fn(end_);
  const auto nodes = graph::list_dps(graph::traverse_dps(end_));
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) (*it)->resume();
  DataPipePtr end = end_;
  return [end](DataPipePtr) { return end; };
}

GraphFunction InProcessReadingService::limit(std::optional<std::size_t> num_batches, GraphFunction limit_fn) {
  if (!limit_fn) return {};
  (void)num_batches;
  end_ = limit_fn(end_);
  DataPipePtr end = end_;
  return [end](DataPipePtr) { return end; };
}

// --- SequentialReadingService -----------------------------------------------------------------------

SequentialReadingService::SequentialReadingService(const SequentialReadingService& other)
    : ReadingService<SequentialReadingService, CheckpointableReadingServiceInterface>(other) {
  for (const auto& service : other.services_) services_.push_back(service->clone());
}

DataPipePtr SequentialReadingService::initialize(DataPipePtr graph) {
  for (auto& service : services_) graph = service->initialize(std::move(graph));
  return graph;
}

GraphFunction SequentialReadingService::initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn) {
  for (auto& service : services_) iter_reset_fn = service->initialize_iteration(seeds, std::move(iter_reset_fn));
  return iter_reset_fn;
}

void SequentialReadingService::finalize_iteration() {
  for (auto it = services_.rbegin(); it != services_.rend(); ++it) (*it)->finalize_iteration();
}

void SequentialReadingService::finalize() {
  for (auto it = services_.rbegin(); it != services_.rend(); ++it) (*it)->finalize();
}

std::vector<std::byte> SequentialReadingService::checkpoint() {
  std::vector<std::vector<std::byte>> states;
  for (auto& service : services_) {
    if (auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(service.get())) {
      states.push_back(checkpointable->checkpoint());
    } else {
      log_warning("SequentialReadingService: service {} doesn't support `checkpoint`, skipping...", states.size());
      states.emplace_back();
    }
  }
  return to_bytes(states);
}

void SequentialReadingService::resume_after_checkpoint() {
  for (auto it = services_.rbegin(); it != services_.rend(); ++it) {
    if (auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(it->get())) {
      checkpointable->resume_after_checkpoint();
    }
  }
}

DataPipePtr SequentialReadingService::restore(DataPipePtr graph, std::span<const std::byte> state) {
  std::vector<std::vector<std::byte>> states;
  try {
    states = from_bytes<std::vector<std::vector<std::byte>>>(state);
  } catch (const SerializationError& error) {
    DPIPE_THROW(StateError, "SequentialReadingService: the checkpoint is corrupt: {}", error.what());
  }
  if (states.size() != services_.size()) {
    DPIPE_THROW(StateError, "SequentialReadingService: the checkpoint has {} services, this one {}", states.size(),
                services_.size());
  }
  for (std::size_t i = 0; i < services_.size(); ++i) {
    if (auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(services_[i].get())) {
      graph = checkpointable->restore(std::move(graph), states[i]);
    } else {
      log_warning("SequentialReadingService: service {} doesn't support `restore` from state, initialize from scratch",
                  i);
      graph = services_[i]->initialize(std::move(graph));
    }
  }
  return graph;
}

bool SequentialReadingService::supports_pause() const {
  return std::ranges::all_of(services_, [](const auto& service) { return service->supports_pause(); });
}

GraphFunction SequentialReadingService::pause(GraphFunction pause_fn) {
  for (auto& service : services_) pause_fn = service->pause(std::move(pause_fn));
  return pause_fn;
}

GraphFunction SequentialReadingService::resume(GraphFunction resume_fn) {
  for (auto& service : services_) resume_fn = service->resume(std::move(resume_fn));
  return resume_fn;
}

bool SequentialReadingService::supports_limit() const {
  return std::ranges::all_of(services_, [](const auto& service) { return service->supports_limit(); });
}

GraphFunction SequentialReadingService::limit(std::optional<std::size_t> num_batches, GraphFunction limit_fn) {
  for (auto& service : services_) limit_fn = service->limit(num_batches, std::move(limit_fn));
  return limit_fn;
}

// --- Shuffle adapter ----------------------------------------------------------------------------------

DataPipePtr Shuffle::operator()(DataPipePtr root, const AdapterContext& context) {
  if (!enable_) return root;
  if (graph::apply_shuffle_settings(root, *enable_) == 0 && *enable_) {
    log_warning(
        "`shuffle=True` was set, but the datapipe does not contain a `Shuffler`. Adding one at the end. Be aware that "
        "the default buffer size might not be sufficient for your task.");
    return context.append_shuffle(root, 10000);
  }
  return root;
}

}  // namespace dpipe

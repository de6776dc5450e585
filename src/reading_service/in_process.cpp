// InProcessReadingService.

#include <dpipe/core/root_ops.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/graph/background.hpp>
#include <dpipe/graph/settings.hpp>
#include <dpipe/reading_service/in_process.hpp>

namespace dpipe {

InProcessReadingService::InProcessReadingService(std::size_t prefetch_cnt, WorkerInitFunction init_fn,
                                                 WorkerResetFunction reset_fn)
    : prefetch_cnt_(prefetch_cnt), init_fn_(std::move(init_fn)), reset_fn_(std::move(reset_fn)) {}

InProcessReadingService::InProcessReadingService(const InProcessReadingService& other)
    : ReadingService(other), prefetch_cnt_(other.prefetch_cnt_), init_fn_(other.init_fn_), reset_fn_(other.reset_fn_) {}

InProcessReadingService::~InProcessReadingService() {
  if (paused_) paused_->keep_stopped();  // destroyed while paused: no thread restarts to run user code now
}

GraphFunction InProcessReadingService::current_root() {
  DataPipePtr end = end_;
  return [end](DataPipePtr) { return end; };
}

DataPipePtr InProcessReadingService::initialize(DataPipePtr graph) {
  graph::apply_sharding(graph, 1, 0, ShardingPriority::kMultiprocessing);
  if (init_fn_) graph = init_fn_(std::move(graph), WorkerInfo{1, 0});
  if (prefetch_cnt_ > 0) graph = apply_typed_op<ops::AppendPrefetch>(graph, prefetch_cnt_);
  end_ = graph;
  return graph;
}

std::optional<std::size_t> InProcessReadingService::epoch_length(const DataPipePtr& graph) const {
  if (init_fn_ || reset_fn_) return std::nullopt;
  return graph::sharded_length(graph, 1, 0, ShardingPriority::kMultiprocessing);
}

GraphFunction InProcessReadingService::initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn) {
  graph::set_graph_random_seed(end_, seeds);
  if (iter_reset_fn) end_ = iter_reset_fn(end_);
  if (reset_fn_) end_ = reset_fn_(end_, WorkerInfo{1, 0}, seeds);
  return current_root();
}

GraphFunction InProcessReadingService::pause(GraphFunction pause_fn) {
  if (!paused_) paused_ = std::make_unique<graph::BackgroundStop>(end_);
  if (pause_fn) end_ = pause_fn(end_);
  return current_root();
}

GraphFunction InProcessReadingService::resume(GraphFunction resume_fn) {
  if (resume_fn) end_ = resume_fn(end_);
  paused_.reset();
  return current_root();
}

GraphFunction InProcessReadingService::limit(std::optional<std::size_t> /*num_batches*/, GraphFunction limit_fn) {
  if (!limit_fn) return {};
  end_ = limit_fn(end_);
  return current_root();
}

}  // namespace dpipe

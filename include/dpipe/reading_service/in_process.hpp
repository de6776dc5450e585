#pragma once
/// \file
/// InProcessReadingService (torchdata's): runs the graph in the calling process. At initialize it
/// applies MULTIPROCESSING sharding for one instance, then `init_fn`, then appends a prefetch of
/// `prefetch_cnt` elements (torchdata stores prefetch_cnt but never uses it; dpipe does). Each
/// epoch it seeds the graph (set_graph_random_seed), applies `iter_reset_fn`, then `reset_fn`
/// (which torchdata never calls). It supports pause, resume and limit (pausing every node, the
/// root first).

#include <cstddef>
#include <functional>

#include <dpipe/reading_service/reading_service.hpp>

namespace dpipe {

class InProcessReadingService final : public ReadingService<InProcessReadingService> {
 public:
  /// Called once with the graph and WorkerInfo{1, 0}; returns the graph to run.
  using InitFunction = std::function<DataPipePtr(DataPipePtr, const WorkerInfo&)>;
  /// Called every epoch, after seeding; returns the graph to run.
  using ResetFunction = std::function<DataPipePtr(DataPipePtr, const WorkerInfo&, SeedGenerator&)>;

  explicit InProcessReadingService(std::size_t prefetch_cnt = 0, InitFunction init_fn = {},
                                   ResetFunction reset_fn = {});

  DataPipePtr initialize(DataPipePtr graph) override;
  GraphFunction initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn = {}) override;

  [[nodiscard]] bool supports_pause() const override { return true; }
  GraphFunction pause(GraphFunction pause_fn = {}) override;
  GraphFunction resume(GraphFunction resume_fn = {}) override;
  [[nodiscard]] bool supports_limit() const override { return true; }
  GraphFunction limit(std::optional<std::size_t> num_batches, GraphFunction limit_fn = {}) override;

 private:
  std::size_t prefetch_cnt_;
  InitFunction init_fn_;
  ResetFunction reset_fn_;
  DataPipePtr end_;  // the root after initialize
};

}  // namespace dpipe

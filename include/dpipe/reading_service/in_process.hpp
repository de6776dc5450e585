#pragma once
/// \file
/// InProcessReadingService (torchdata's): runs the graph in the calling process. At initialize it
/// applies MULTIPROCESSING sharding for one instance, then `init_fn`, then appends a prefetch of
/// `prefetch_cnt` elements (torchdata stores prefetch_cnt but never uses it; dpipe does). Each
/// epoch it seeds the graph (set_graph_random_seed), applies `iter_reset_fn`, then `reset_fn`
/// (which torchdata never calls). It supports pause, resume and limit: pausing stops the graph's
/// background threads (graph::BackgroundStop) until resume.

#include <cstddef>
#include <memory>

#include <dpipe/reading_service/reading_service.hpp>

namespace dpipe {

namespace graph {
class BackgroundStop;
}  // namespace graph

class InProcessReadingService final : public ReadingService<InProcessReadingService> {
 public:
  /// It appends a prefetch (prefetch_cnt), never a fullsync.
  static constexpr RootOps kRootOps{.prefetch = true, .fullsync = false};

  /// `init_fn` gets the graph and WorkerInfo{1, 0} once; `reset_fn` every epoch, after seeding.
  explicit InProcessReadingService(std::size_t prefetch_cnt = 0, WorkerInitFunction init_fn = {},
                                   WorkerResetFunction reset_fn = {});
  /// Copies the configuration; the copy is not initialized.
  InProcessReadingService(const InProcessReadingService& other);
  InProcessReadingService& operator=(const InProcessReadingService&) = delete;
  ~InProcessReadingService() override;

  DataPipePtr initialize(DataPipePtr graph) override;
  /// The graph's length (as worker 0 of 1); unknown with an init or reset function, which may
  /// reshape the graph.
  [[nodiscard]] std::optional<std::size_t> epoch_length(const DataPipePtr& graph) const override;
  GraphFunction initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn = {}) override;

  [[nodiscard]] bool supports_pause() const override { return true; }
  GraphFunction pause(GraphFunction pause_fn = {}) override;
  GraphFunction resume(GraphFunction resume_fn = {}) override;
  [[nodiscard]] bool supports_limit() const override { return true; }
  GraphFunction limit(std::optional<std::size_t> num_batches, GraphFunction limit_fn = {}) override;

 private:
  GraphFunction current_root();

  std::size_t prefetch_cnt_;
  WorkerInitFunction init_fn_;
  WorkerResetFunction reset_fn_;
  DataPipePtr end_;                                // the root after initialize
  std::unique_ptr<graph::BackgroundStop> paused_;  // while paused
};

}  // namespace dpipe

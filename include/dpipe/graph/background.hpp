#pragma once
/// \file
/// BackgroundStop: stops the background work of a whole graph (the threads of prefetch and
/// threadpool_map nodes) for as long as it lives: to read the graph's state, to fork, or while the
/// loader is paused. Nothing buffered is lost. This is the only way dpipe stops a graph's threads;
/// "pause" is the loader's and the reading services' word for handing out no more elements.

#include <vector>

#include <dpipe/core/datapipe.hpp>

namespace dpipe::graph {

/// Thread-safety: the thread that iterates the graph.
class BackgroundStop {
 public:
  /// Stops every node upstream of `root`, root first (DataPipe::stop_background). When a node's
  /// stop throws, the nodes stopped before it are restarted and the exception propagates.
  explicit BackgroundStop(const DataPipePtr& root);
  /// Restarts the nodes, sources first (DataPipe::start_background), unless keep_stopped() was
  /// called. Nodes restart lazily anyway when they are next read.
  ~BackgroundStop();
  BackgroundStop(const BackgroundStop&) = delete;
  BackgroundStop& operator=(const BackgroundStop&) = delete;

  /// Leaves the nodes stopped when this object goes away.
  void keep_stopped() noexcept { nodes_.clear(); }

 private:
  /// Restarts the stopped nodes, sources first; a node that fails to restart is logged.
  void restart() noexcept;

  std::vector<DataPipePtr> nodes_;
};

}  // namespace dpipe::graph

// BackgroundStop.

#include <dpipe/core/logging.hpp>
#include <dpipe/graph/background.hpp>
#include <dpipe/graph/graph.hpp>

namespace dpipe::graph {

BackgroundStop::BackgroundStop(const DataPipePtr& root) : nodes_(list_dps(traverse_dps(root))) {
  for (const auto& node : nodes_) node->stop_background();
}

BackgroundStop::~BackgroundStop() {
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
    try {
      (*it)->start_background();
    } catch (const std::exception& error) {
      log_warning("{} failed to restart its background work: {}", (*it)->label(), error.what());
    }
  }
}

}  // namespace dpipe::graph

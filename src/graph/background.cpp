// BackgroundStop.

#include <exception>

#include <dpipe/core/logging.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/graph/background.hpp>
#include <dpipe/graph/graph.hpp>

namespace dpipe::graph {

BackgroundStop::BackgroundStop(const DataPipePtr& root) {
  const auto nodes = list_dps(traverse_dps(root));
  nodes_.reserve(nodes.size());
  for (const auto& node : nodes) {
    try {
      node->stop_background();
    } catch (...) {
      restart();  // what was stopped before the failure
      throw;
    }
    nodes_.push_back(node);
  }
}

BackgroundStop::~BackgroundStop() { restart(); }

void BackgroundStop::restart() noexcept {
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
    try {
      (*it)->start_background();
    } catch (...) {
      log_warning("{} failed to restart its background work: {}", (*it)->label(),
                  dpipe::detail::describe(std::current_exception()));
    }
  }
  nodes_.clear();
}

}  // namespace dpipe::graph

// What the children of a MultiProcessingReadingService are called.

#include "plan.hpp"

#include <fmt/format.h>

namespace dpipe::detail::mp {

std::string worker_name(const GroupConfig& config, std::size_t worker_id) {
  return fmt::format("worker {} {}", config.threads ? "thread" : "process", worker_id);
}

std::string dispatcher_name(const GroupConfig& config) {
  return config.threads ? "dispatching thread" : "dispatching process";
}

}  // namespace dpipe::detail::mp

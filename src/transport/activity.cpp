// Durations in stall reports.

#include "activity.hpp"

#include <fmt/format.h>

namespace dpipe::detail::transport {

std::string describe_duration(std::chrono::nanoseconds duration) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
  if (ms < 1000) return fmt::format("{} ms", ms);
  return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0);
}

}  // namespace dpipe::detail::transport

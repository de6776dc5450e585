// The "dpipe" spdlog logger.

#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <dpipe/core/logging.hpp>

namespace dpipe {
namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  auto created = spdlog::stderr_color_mt("dpipe");
  created->set_level(spdlog::level::warn);
  if (const char* level = std::getenv("DPIPE_LOG_LEVEL"); level != nullptr && *level != '\0') {
    const auto parsed = spdlog::level::from_str(level);
    // from_str maps unknown names to "off"; an explicit "off" is the only way to ask for it.
    if (parsed != spdlog::level::off || std::string(level) == "off") {
      created->set_level(parsed);
    } else {
      created->warn("DPIPE_LOG_LEVEL='{}' is not one of trace, debug, info, warn, error, critical, off; using warn",
                    level);
    }
  }
  return created;
}

}  // namespace

std::shared_ptr<spdlog::logger> logger() {
  static const std::shared_ptr<spdlog::logger> instance = make_logger();
  return instance;
}

namespace detail {
void log_warning(std::string_view message) { logger()->warn("{}", message); }
void log_debug(std::string_view message) { logger()->debug("{}", message); }
}  // namespace detail

}  // namespace dpipe

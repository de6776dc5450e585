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
    if (const auto parsed = detail::parse_log_level(level)) {
      created->set_level(static_cast<spdlog::level::level_enum>(*parsed));
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

std::optional<int> parse_log_level(std::string_view name) {
  static constexpr std::pair<std::string_view, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug}, {"info", spdlog::level::info},
      {"warn", spdlog::level::warn},   {"error", spdlog::level::err},   {"critical", spdlog::level::critical},
      {"off", spdlog::level::off},
  };
  for (const auto& [text, level] : kLevels) {
    if (name == text) return static_cast<int>(level);
  }
  return std::nullopt;
}

void write_warning(std::string_view message) { logger()->warn("{}", message); }
void write_debug(std::string_view message) { logger()->debug("{}", message); }
}  // namespace detail

}  // namespace dpipe

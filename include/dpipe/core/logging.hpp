#pragma once
/// \file
/// dpipe's logger: the spdlog logger named "dpipe", writing to stderr. Its level comes from the
/// environment variable DPIPE_LOG_LEVEL (trace, debug, info, warn, error, critical, off); the
/// default is warn, so dpipe is silent at info level. Thread-safe.

#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/core.h>

namespace spdlog {
class logger;
}

namespace dpipe {

/// The "dpipe" logger, created on first use. Add sinks to it to capture dpipe's messages.
std::shared_ptr<spdlog::logger> logger();

namespace detail {
/// The spdlog level named by a DPIPE_LOG_LEVEL value (trace, debug, info, warn, error, critical,
/// off), as spdlog::level::level_enum's integer; std::nullopt for anything else.
std::optional<int> parse_log_level(std::string_view name);
void write_warning(std::string_view message);
void write_debug(std::string_view message);
}  // namespace detail

/// Logs a warning on the dpipe logger.
template <class... Args>
void log_warning(fmt::format_string<Args...> format, Args&&... args) {
  detail::write_warning(fmt::format(format, std::forward<Args>(args)...));
}

/// Logs a debug message on the dpipe logger.
template <class... Args>
void log_debug(fmt::format_string<Args...> format, Args&&... args) {
  detail::write_debug(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace dpipe

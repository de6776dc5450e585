#pragma once
// Captures what dpipe logs while a LogCapture is alive.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include <dpipe/core/logging.hpp>

namespace dpipe::testing {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<Sink>()) { dpipe::logger()->sinks().push_back(sink_); }
  ~LogCapture() {
    auto& sinks = dpipe::logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  /// The messages logged so far, at any level that passed the logger's level.
  std::vector<std::string> messages() const {
    std::lock_guard lock(sink_->mutex);
    return sink_->messages;
  }

 private:
  struct Sink : spdlog::sinks::base_sink<std::mutex> {
    std::vector<std::string> messages;
    mutable std::mutex mutex;
    void sink_it_(const spdlog::details::log_msg& message) override {
      std::lock_guard lock(mutex);
      messages.emplace_back(message.payload.data(), message.payload.size());
    }
    void flush_() override {}
  };
  std::shared_ptr<Sink> sink_;
};

}  // namespace dpipe::testing

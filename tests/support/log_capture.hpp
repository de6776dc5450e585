#pragma once
// Captures what dpipe logs while a LogCapture is alive.

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include <dpipe/core/logging.hpp>

namespace dpipe::testing {

class LogCapture {
 public:
  /// Captures messages; calls `on_message` with each as it is logged (on the logging thread).
  explicit LogCapture(std::function<void(const std::string&)> on_message = {}) : sink_(std::make_shared<Sink>()) {
    sink_->on_message = std::move(on_message);
    dpipe::logger()->sinks().push_back(sink_);
  }
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
    std::function<void(const std::string&)> on_message;
    mutable std::mutex mutex;
    void sink_it_(const spdlog::details::log_msg& message) override {
      std::string text(message.payload.data(), message.payload.size());
      {
        std::lock_guard lock(mutex);
        messages.push_back(text);
      }
      if (on_message) on_message(text);
    }
    void flush_() override {}
  };
  std::shared_ptr<Sink> sink_;
};

}  // namespace dpipe::testing

#pragma once
// MessageContains: a Catch2 exception matcher for messages that must contain several parts (Catch2
// v2 only matches whole messages).

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

namespace dpipe::testing {

class MessageContains final : public Catch::MatcherBase<std::exception> {
 public:
  explicit MessageContains(std::vector<std::string> parts) : parts_(std::move(parts)) {}

  bool match(const std::exception& error) const override {
    const std::string message = error.what();
    for (const auto& part : parts_) {
      if (message.find(part) == std::string::npos) return false;
    }
    return true;
  }

  std::string describe() const override {
    std::string text = "has a message containing";
    for (const auto& part : parts_) text += " \"" + part + "\"";
    return text;
  }

 private:
  std::vector<std::string> parts_;
};

}  // namespace dpipe::testing

#pragma once
// MemoryStore: a Store of a trainer's own, kept in this process's memory (the ranks of a test are
// threads), with Store's default exchange. It stands for the store a trainer's framework
// already has, which it hands to DistributedReadingService.

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/distributed/store.hpp>

namespace dpipe::testing {

/// Thread-safe.
class MemoryStore final : public Store {
 public:
  void set(const std::string& key, std::span<const std::byte> value) override {
    {
      const std::lock_guard lock(mutex_);
      values_[key].assign(value.begin(), value.end());
    }
    changed_.notify_all();
  }
  std::vector<std::byte> get(const std::string& key) override {
    std::unique_lock lock(mutex_);
    wait_for(lock, {key}, "get('" + key + "')");
    return values_.at(key);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::int64_t sum = 0;
    {
      const std::lock_guard lock(mutex_);
      auto& value = values_[key];
      sum = (value.empty() ? 0 : std::stoll(std::string(reinterpret_cast<const char*>(value.data()), value.size()))) +
            delta;
      const std::string text = std::to_string(sum);
      const auto bytes = std::as_bytes(std::span(text));
      value.assign(bytes.begin(), bytes.end());
    }
    changed_.notify_all();
    return sum;
  }
  std::vector<std::byte> compare_set(const std::string& key, std::span<const std::byte> expected,
                                     std::span<const std::byte> desired) override {
    std::vector<std::byte> now;
    {
      const std::lock_guard lock(mutex_);
      const auto found = values_.find(key);
      const bool matches = found == values_.end() ? expected.empty()
                                                  : std::ranges::equal(found->second, expected);
      if (matches) values_[key].assign(desired.begin(), desired.end());
      if (values_.contains(key)) now = values_.at(key);
    }
    changed_.notify_all();
    return now;
  }
  void wait(const std::vector<std::string>& keys) override {
    std::unique_lock lock(mutex_);
    wait_for(lock, keys, "wait");
  }
  bool remove(const std::string& key) override {
    const std::lock_guard lock(mutex_);
    return values_.erase(key) > 0;
  }
  [[nodiscard]] std::chrono::milliseconds timeout() const override {
    const std::lock_guard lock(mutex_);
    return timeout_;
  }
  void set_timeout(std::chrono::milliseconds timeout) override {
    const std::lock_guard lock(mutex_);
    timeout_ = timeout;
  }
  /// The keys it holds now.
  [[nodiscard]] std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return values_.size();
  }

  using Store::set;

 private:
  void wait_for(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys, const std::string& what) {
    const auto all_there = [&] {
      return std::ranges::all_of(keys, [&](const std::string& key) { return values_.contains(key); });
    };
    if (!changed_.wait_for(lock, timeout_, all_there)) {
      DPIPE_THROW(TimeoutError, "MemoryStore: {} timed out after {} ms", what, timeout_.count());
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<std::byte>> values_;
  std::chrono::milliseconds timeout_{std::chrono::seconds(20)};
};

}  // namespace dpipe::testing

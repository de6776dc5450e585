#pragma once
/// \file
/// `in_memory_cache(capacity)` (torchdata's InMemoryCacheHolder): the first complete iteration
/// yields the source's elements and keeps them; later iterations yield the kept elements without
/// touching the source. With a capacity (in elements; torchdata counts megabytes of the container
/// only), the oldest elements are dropped from the cache and later iterations read those first
/// elements from the source again. An iteration abandoned before the end caches nothing.
/// Checkpoint state: the cache, and the position in it (or the elements gathered so far).

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::iter {

template <class T>
class InMemoryCacheHolder final : public IterDataPipe<T> {
 public:
  static constexpr std::string_view kName = "in_memory_cache";

  InMemoryCacheHolder(const IterPipe<T>& source, std::optional<std::size_t> capacity)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), capacity_(capacity) {
    if (capacity && *capacity == 0) DPIPE_THROW(InvalidArgument, "in_memory_cache capacity must be > 0 elements");
  }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<InMemoryCacheHolder>(*this); }

  /// Whether a complete iteration has filled the cache.
  [[nodiscard]] bool cached() const noexcept { return cached_; }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("cached", cached_);
    writer.write("dropped", std::uint64_t{dropped_});
    detail::write_elements<T>(writer, "cache", *this, cache_);
    writer.write("phase", static_cast<std::uint8_t>(phase_));
    writer.write("position", std::uint64_t{position_});
    writer.write("gathering_dropped", std::uint64_t{gathering_dropped_});
    detail::write_elements<T>(writer, "gathering", *this, gathering_);
    return true;
  }
  void load_state(const StateReader& reader) override {
    cached_ = reader.read<bool>("cached");
    dropped_ = reader.read<std::uint64_t>("dropped");
    auto cache = detail::read_elements<T>(reader, "cache", *this);
    const auto phase = reader.read<std::uint8_t>("phase");
    position_ = reader.read<std::uint64_t>("position");
    gathering_dropped_ = reader.read<std::uint64_t>("gathering_dropped");
    auto gathering = detail::read_elements<T>(reader, "gathering", *this);
    if (phase > static_cast<std::uint8_t>(Phase::kFromCache) || position_ > dropped_ + cache.size()) {
      DPIPE_THROW(StateError, "{}: the saved cache position is inconsistent", this->label());
    }
    phase_ = static_cast<Phase>(phase);
    cache_.assign(std::make_move_iterator(cache.begin()), std::make_move_iterator(cache.end()));
    gathering_.assign(std::make_move_iterator(gathering.begin()), std::make_move_iterator(gathering.end()));
  }

 protected:
  void reset_impl() override {
    position_ = 0;
    gathering_.clear();
    gathering_dropped_ = 0;
    if (cached_ && dropped_ == 0) {
      phase_ = Phase::kFromCache;
      return;
    }
    phase_ = cached_ ? Phase::kSourcePrefix : Phase::kGathering;
    source_.reset();
  }

  std::optional<T> next_impl() override {
    switch (phase_) {
      case Phase::kGathering: {
        auto element = source_.next();
        if (!element) {
          commit();
          return std::nullopt;
        }
        gathering_.push_back(*element);
        if (capacity_ && gathering_.size() > *capacity_) {
          gathering_.pop_front();
          ++gathering_dropped_;
        }
        return element;
      }
      case Phase::kSourcePrefix: {
        if (position_ < dropped_) {
          ++position_;
          if (auto element = source_.next()) return element;
          position_ = dropped_;  // the source is shorter than before: go on with the cache
        }
        phase_ = Phase::kFromCache;
        return next_impl();
      }
      case Phase::kFromCache: {
        const std::size_t index = position_ - dropped_;
        if (index >= cache_.size()) return std::nullopt;
        ++position_;
        return cache_[index];
      }
    }
    return std::nullopt;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    if (const auto length = source_.length()) return length;
    if (cached_) return dropped_ + cache_.size();
    return std::nullopt;
  }

  [[nodiscard]] std::string no_length_reason() const override {
    return this->label() + " instance doesn't have valid length until the cache is loaded.";
  }

 private:
  enum class Phase : std::uint8_t { kGathering, kSourcePrefix, kFromCache };

  /// A complete first iteration: its elements become the cache.
  void commit() {
    cache_ = std::move(gathering_);
    dropped_ = gathering_dropped_;
    gathering_ = {};
    gathering_dropped_ = 0;
    cached_ = true;
    position_ = dropped_ + cache_.size();
    phase_ = Phase::kFromCache;
  }

  Input<T> source_;
  std::optional<std::size_t> capacity_;
  bool cached_ = false;
  std::size_t dropped_ = 0;  // leading elements not in the cache (capacity exceeded)
  std::deque<T> cache_;
  Phase phase_ = Phase::kGathering;
  std::size_t position_ = 0;  // elements yielded in this iteration (kSourcePrefix / kFromCache)
  std::deque<T> gathering_;   // the first complete iteration's elements, as they come
  std::size_t gathering_dropped_ = 0;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
template <class U>
requires copyable_element<U> IterPipe<T> IterPipe<T>::in_memory_cache(std::optional<std::size_t> capacity)
const { return make_iter<iter::InMemoryCacheHolder<T>>(*this, capacity); }

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::in_memory_cache(capacity)`.
[[nodiscard]] inline auto in_memory_cache(std::optional<std::size_t> capacity = std::nullopt) {
  return PipeAdaptor{[=](const auto& source) { return source.in_memory_cache(capacity); }};
}

}  // namespace dpipe::iter

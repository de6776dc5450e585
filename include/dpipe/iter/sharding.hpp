#pragma once
/// \file
/// `sharding_filter()` (torchdata's ShardingFilter) and `sharding_round_robin_dispatch(group)`
/// (ShardingRoundRobinDispatcher). Sharding is configured by graph::apply_sharding (which reading
/// services call), not by the constructor.

#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/detail/iteration_local.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe {
namespace detail {

/// The sharding settings of one ShardingFilter: the groups applied so far and the resulting
/// instance. Thread-safety: none.
class ShardingSettings {
 public:
  explicit ShardingSettings(std::optional<ShardingPriority> group_filter) : group_filter_(group_filter) {}

  /// Applies (num_instances, instance_id) for `group`, with torchdata's checks and combination rule.
  void apply(std::size_t num_instances, std::size_t instance_id, ShardingPriority group);

  [[nodiscard]] std::size_t num_instances() const noexcept { return num_instances_; }
  [[nodiscard]] std::size_t instance_id() const noexcept { return instance_id_; }
  [[nodiscard]] bool applied(ShardingPriority group) const { return groups_.contains(group); }

 private:
  std::optional<ShardingPriority> group_filter_;
  std::map<ShardingPriority, std::pair<std::size_t, std::size_t>> groups_;
  std::size_t num_instances_ = 1;
  std::size_t instance_id_ = 0;
};

}  // namespace detail

namespace iter {

/// Keeps the elements whose index i satisfies `i % num_instances == instance_id`.
/// Checkpoint state: the index of the next source element.
template <class T>
class ShardingFilter final : public IterDataPipe<T>, public ShardingDataPipe {
 public:
  static constexpr std::string_view kName = "sharding_filter";

  ShardingFilter(const IterPipe<T>& source, std::optional<ShardingPriority> group_filter)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), settings_(group_filter) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<ShardingFilter>(*this); }

  void apply_sharding(std::size_t num_instances, std::size_t instance_id, ShardingPriority group) override {
    settings_.apply(num_instances, instance_id, group);
  }
  [[nodiscard]] bool sharded_for(ShardingPriority group) const override { return settings_.applied(group); }
  [[nodiscard]] std::size_t num_instances() const noexcept { return settings_.num_instances(); }
  [[nodiscard]] std::size_t instance_id() const noexcept { return settings_.instance_id(); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("index", std::uint64_t{index_});
    return true;
  }
  void load_state(const StateReader& reader) override { index_ = reader.read<std::uint64_t>("index"); }

 protected:
  void reset_impl() override {
    index_ = 0;
    source_.reset();
  }

  std::optional<T> next_impl() override {
    while (auto element = source_.next()) {
      if (keeps(index_++)) return element;
    }
    return std::nullopt;
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    const std::size_t instances = settings_.num_instances();
    if (instances == 1) {
      const std::size_t got = source_.pull(out, n);
      index_ += got;
      return got;
    }
    // The source's elements go to a staging area, and only this instance's share to `out`: a
    // batch that pulls n elements into a vector reserved for n is never reallocated.
    auto& staging = *staging_;
    std::size_t produced = 0;
    while (produced < n) {
      // Up to the index of the last element still wanted, so nothing is read ahead.
      const std::size_t offset = (settings_.instance_id() + instances - index_ % instances) % instances;
      const std::size_t wanted = offset + (n - produced - 1) * instances + 1;
      staging.clear();
      std::size_t got = 0;
      try {
        got = source_.pull(staging, wanted);
      } catch (...) {
        // What the source appended before failing precedes the failure: keep this instance's share.
        (void)keep_share(staging, out, offset, instances);
        throw;
      }
      produced += keep_share(staging, out, offset, instances);
      if (got < wanted) break;
    }
    staging.clear();
    return produced;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    const auto source_length = source_.length();
    if (!source_length) return std::nullopt;
    const std::size_t n = settings_.num_instances();
    return *source_length / n + (settings_.instance_id() < *source_length % n ? 1 : 0);
  }

 private:
  /// Moves this instance's elements of those the source appended to `staged` (the one at `offset`
  /// and every `instances`-th after it) to `out`, and counts them all in the index. A stride, not a
  /// test of every index: no division per element.
  std::size_t keep_share(std::vector<T>& staged, std::vector<T>& out, std::size_t offset, std::size_t instances) {
    std::size_t kept = 0;
    for (std::size_t at = offset; at < staged.size(); at += instances) {
      out.push_back(std::move(staged[at]));
      ++kept;
    }
    index_ += staged.size();
    return kept;
  }

  [[nodiscard]] bool keeps(std::size_t index) const noexcept {
    return index % settings_.num_instances() == settings_.instance_id();
  }

  Input<T> source_;
  detail::ShardingSettings settings_;
  std::size_t index_ = 0;
  detail::IterationLocal<std::vector<T>> staging_;
};

/// An identity that marks the end of a branch to run once, in MultiProcessingReadingService's
/// dispatching process. Stateless.
template <class T>
class ShardingRoundRobinDispatcher final : public IterDataPipe<T>, public dpipe::detail::RoundRobinDispatchTag {
 public:
  static constexpr std::string_view kName = "sharding_round_robin_dispatch";

  ShardingRoundRobinDispatcher(const IterPipe<T>& source, ShardingPriority group)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()) {
    if (group != ShardingPriority::kMultiprocessing) {
      DPIPE_THROW(NotSupportedError,
                  "`sharding_round_robin_dispatch` currently only supports "
                  "`SHARDING_PRIORITIES.MULTIPROCESSING`.Please open issue on github for your "
                  "feature request.");
    }
  }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override {
    return std::make_shared<ShardingRoundRobinDispatcher>(*this);
  }
  [[nodiscard]] bool stateless() const noexcept override { return true; }

 protected:
  std::optional<T> next_impl() override { return source_.next(); }
  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override { return source_.pull(out, n); }
  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return source_.length(); }

 private:
  Input<T> source_;
};

}  // namespace iter

template <class T>
IterPipe<T> IterPipe<T>::sharding_filter(std::optional<ShardingPriority> group_filter) const {
  return make_iter<iter::ShardingFilter<T>>(*this, group_filter);
}

template <class T>
IterPipe<T> IterPipe<T>::sharding_round_robin_dispatch(ShardingPriority group) const {
  return make_iter<iter::ShardingRoundRobinDispatcher<T>>(*this, group);
}

namespace iter {

/// `src | iter::sharding_filter()`.
[[nodiscard]] inline auto sharding_filter(std::optional<ShardingPriority> group_filter = std::nullopt) {
  return PipeAdaptor{[=](const auto& source) { return source.sharding_filter(group_filter); }};
}

/// `src | iter::sharding_round_robin_dispatch(group)`.
[[nodiscard]] inline auto sharding_round_robin_dispatch(ShardingPriority group) {
  return PipeAdaptor{[=](const auto& source) { return source.sharding_round_robin_dispatch(group); }};
}

}  // namespace iter
}  // namespace dpipe

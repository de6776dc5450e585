#pragma once
/// \file
/// GlobalSampler: the start of a global-order pipeline. It reads a random-access source in the
/// epoch's order (sequential, or a keyed permutation computed per position), and only the steps
/// of its instance (see GlobalSchedule). Users build it with `global_order()`
/// (<dpipe/global/global_pipe.hpp>).

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/map_datapipe.hpp>
#include <dpipe/core/map_pipe.hpp>
#include <dpipe/global/global_epoch.hpp>
#include <dpipe/global/sampled.hpp>
#include <dpipe/global/schedule.hpp>
#include <dpipe/random/index_permutation.hpp>

namespace dpipe {

/// How a global order reads its source.
struct GlobalOrderOptions {
  /// A new keyed permutation of the source's indices every epoch; false: in index order.
  bool shuffle = true;
  /// What the ranks do with an epoch's last steps that do not make a whole round.
  EpochTail tail = EpochTail::kDrop;
};

namespace detail {

/// What a sampler is told from outside (its sharding, its epoch, its step), independent of the
/// element type. Thread-safety: none.
class GlobalSamplerSettings {
 public:
  explicit GlobalSamplerSettings(GlobalOrderOptions options) : options_(options) {}

  void apply_sharding(std::size_t num_instances, std::size_t instance_id, ShardingPriority group);
  [[nodiscard]] bool sharded_for(ShardingPriority group) const noexcept;
  void set_step(std::uint64_t span, bool drop_last);
  void set_epoch(const GlobalEpoch& epoch) noexcept { epoch_ = epoch; }
  [[nodiscard]] const std::optional<GlobalEpoch>& epoch() const noexcept { return epoch_; }
  /// The schedule for a source of `size` elements, as the settings stand.
  [[nodiscard]] GlobalSchedule schedule(std::uint64_t size) const;
  /// The permutation of positions for a source of `size` elements in the current epoch.
  [[nodiscard]] IndexPermutation permutation(std::uint64_t size) const;
  [[nodiscard]] bool shuffle() const noexcept { return options_.shuffle; }
  [[nodiscard]] std::uint64_t key() const noexcept { return epoch_ ? epoch_->key : 0; }
  /// The settings a checkpoint records: shuffle, tail, span, drop_last.
  [[nodiscard]] NodeSettings settings() const;

 private:
  GlobalOrderOptions options_;
  std::optional<GlobalEpoch> epoch_;
  std::uint64_t span_ = 1;
  bool drop_last_ = false;
  bool step_set_ = false;
  GlobalLayout layout_;
  bool distributed_ = false;
  bool multiprocessing_ = false;
};

}  // namespace detail

/// Reads source index `permutation(position)` for each position of its instance's steps and
/// yields it as a Sampled<V>. The source is a map pipe with integral keys 0 .. size()-1. Its
/// nodes keep no checkpoint state of their own: the loader records the global position.
/// Thread-safety: one thread iterates at a time.
template <class K, class V>
class GlobalSampler final : public IterDataPipe<Sampled<V>>, public ShardingDataPipe, public GlobalOrderSource {
  static_assert(std::is_integral_v<K>, "a global order reads a map pipe with integral keys 0 .. size()-1");

 public:
  static constexpr std::string_view kName = "global_order";

  GlobalSampler(const MapPipe<K, V>& source, GlobalOrderOptions options)
      : IterDataPipe<Sampled<V>>(std::string(kName)), source_(source.ptr()), settings_(options) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<GlobalSampler>(*this); }
  [[nodiscard]] NodeSettings settings() const override { return settings_.settings(); }

  void apply_sharding(std::size_t num_instances, std::size_t instance_id, ShardingPriority group) override {
    settings_.apply_sharding(num_instances, instance_id, group);
  }
  [[nodiscard]] bool sharded_for(ShardingPriority group) const override { return settings_.sharded_for(group); }
  void set_global_epoch(const GlobalEpoch& epoch) override { settings_.set_epoch(epoch); }
  [[nodiscard]] std::optional<GlobalEpoch> global_epoch() const override { return settings_.epoch(); }
  [[nodiscard]] GlobalSchedule schedule() const override { return settings_.schedule(source_.size()); }
  void set_step(std::uint64_t span, bool drop_last) override { settings_.set_step(span, drop_last); }

 protected:
  void reset_impl() override {
    const std::uint64_t size = source_.size();
    schedule_ = settings_.schedule(size);
    permutation_ = settings_.permutation(size);
    step_ = 0;
    position_ = schedule_.owned_steps() > 0 ? schedule_.positions(schedule_.owned_step(0)).first : 0;
    ahead_ = position_;
    computed_ = position_;
  }

  std::optional<Sampled<V>> next_impl() override {
    if (!advance()) return std::nullopt;
    const std::uint64_t step = schedule_.owned_step(step_);
    hint_ahead(schedule_.positions(step).second);
    return sampled(step, indices_[position_++ % kIndices]);
  }

  /// Reads in runs of kRun, having hinted the source (MapDataPipe::prefetch) up to kAhead
  /// positions ahead: a run is read while the next one loads, so the waits of a random order
  /// overlap, and a source that batches its reads gets whole runs of hints.
  std::size_t pull_impl(std::vector<Sampled<V>>& out, std::size_t n) override {
    std::size_t produced = 0;
    while (produced < n && advance()) {
      const std::uint64_t step = schedule_.owned_step(step_);
      const std::uint64_t last = schedule_.positions(step).second;
      hint_ahead(last);
      const auto run = static_cast<std::size_t>(std::min<std::uint64_t>({last - position_, n - produced, kRun}));
      for (std::size_t i = 0; i < run; ++i) out.push_back(sampled(step, indices_[position_++ % kIndices]));
      produced += run;
    }
    return produced;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    return static_cast<std::size_t>(settings_.schedule(source_.size()).owned_positions());
  }

 private:
  /// Moves to the next position to read, if any.
  bool advance() {
    while (step_ < schedule_.owned_steps()) {
      const auto [first, last] = schedule_.positions(schedule_.owned_step(step_));
      if (position_ < last) return true;
      if (++step_ < schedule_.owned_steps()) {
        position_ = schedule_.positions(schedule_.owned_step(step_)).first;
        ahead_ = position_;
        computed_ = position_;
      }
    }
    return false;
  }

  /// Hints the source of each position up to kAhead past the current one (within the step, which
  /// ends at `last`) not hinted yet, computing their indices first, kBlock at a time.
  void hint_ahead(std::uint64_t last) noexcept {
    for (const std::uint64_t until = std::min(last, position_ + kAhead); ahead_ < until; ++ahead_) {
      if (ahead_ == computed_) compute_indices(last);
      source_.prefetch(static_cast<K>(indices_[ahead_ % kIndices]));
    }
  }

  /// Computes the indices of up to kBlock positions from computed_ on, within the step (which ends
  /// at `last`) and not past the end of indices_ (the next block starts at its beginning).
  void compute_indices(std::uint64_t last) noexcept {
    const std::size_t slot = computed_ % kIndices;
    const auto count = static_cast<std::size_t>(std::min<std::uint64_t>({last - computed_, kBlock, kIndices - slot}));
    if (settings_.shuffle()) {
      permutation_.indices(computed_, count, &indices_[slot]);
    } else {
      for (std::size_t i = 0; i < count; ++i) indices_[slot + i] = computed_ + i;
    }
    computed_ += count;
  }

  Sampled<V> sampled(std::uint64_t step, std::uint64_t index) {
    return Sampled<V>{step, index, sample_seed(settings_.key(), index), source_.get(static_cast<K>(index))};
  }

  static constexpr std::size_t kRun = 32;
  static constexpr std::size_t kAhead = 2 * kRun;
  static constexpr std::size_t kBlock = 128;  // IndexPermutation::indices runs 64 lanes at a time
  // positions [position_, computed_) keep their indices: computed_ - position_ <= kAhead + kBlock
  static constexpr std::size_t kIndices = 256;
  static_assert(kAhead + kBlock <= kIndices && kIndices % kBlock == 0);

  MapInput<K, V> source_;
  detail::GlobalSamplerSettings settings_;
  GlobalSchedule schedule_;
  IndexPermutation permutation_{0, 0};
  std::uint64_t step_ = 0;                         // the instance's step being read (an index into its owned steps)
  std::uint64_t position_ = 0;                     // the next position of that step
  std::uint64_t ahead_ = 0;                        // the positions before it were hinted
  std::uint64_t computed_ = 0;                     // the positions before it have their indices in indices_
  std::array<std::uint64_t, kIndices> indices_{};  // position p's index at p % kIndices
};

}  // namespace dpipe

// The global order's arithmetic and protocol: GlobalSchedule, the sampler's settings, the end's
// positions, and the graph functions that reach the global-order nodes.

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/global/global_end.hpp>
#include <dpipe/global/global_epoch.hpp>
#include <dpipe/global/sampler.hpp>
#include <dpipe/global/schedule.hpp>
#include <dpipe/global/step_batch.hpp>
#include <dpipe/graph/graph.hpp>

namespace dpipe {

// --- GlobalSchedule ----------------------------------------------------------------------------------

GlobalSchedule::GlobalSchedule(std::uint64_t size, std::uint64_t span, bool drop_last, EpochTail tail,
                               GlobalLayout layout, std::uint64_t start_step)
    : size_(size), span_(span), layout_(layout) {
  if (span == 0) DPIPE_THROW(InvalidArgument, "a global order's step spans at least one position");
  if (layout.world == 0 || layout.rank >= layout.world || layout.workers == 0 || layout.worker >= layout.workers) {
    DPIPE_THROW(InvalidArgument, "a global order's instance is rank {} of {}, worker {} of {}: out of range",
                layout.rank, layout.world, layout.worker, layout.workers);
  }
  total_ = drop_last ? size / span : (size + span - 1) / span;
  start_ = std::min(start_step, total_);
  const std::uint64_t rest = total_ - start_;
  if (layout.world == 1 || tail == EpochTail::kDrop || total_ == 0) {
    rank_steps_ = rest / layout.world;
  } else {
    rank_steps_ = (rest + layout.world - 1) / layout.world;
  }
}

std::uint64_t GlobalSchedule::owned_steps() const noexcept {
  if (rank_steps_ <= layout_.worker) return 0;
  return (rank_steps_ - layout_.worker - 1) / layout_.workers + 1;
}

std::pair<std::uint64_t, std::uint64_t> GlobalSchedule::positions(std::uint64_t step) const noexcept {
  const std::uint64_t wrapped = step % total_;
  const std::uint64_t first = wrapped * span_;
  return {first, std::min(first + span_, size_)};
}

std::uint64_t GlobalSchedule::owned_positions() const noexcept {
  std::uint64_t count = 0;
  for (std::uint64_t k = 0; k < owned_steps(); ++k) {
    const auto [first, last] = positions(owned_step(k));
    count += last - first;
  }
  return count;
}

// --- the sampler's settings --------------------------------------------------------------------------

namespace detail {

void GlobalSamplerSettings::apply_sharding(std::size_t num_instances, std::size_t instance_id, ShardingPriority group) {
  if (num_instances == 0 || instance_id >= num_instances) {
    DPIPE_THROW(InvalidArgument, "global_order: instance {} of {} is out of range", instance_id, num_instances);
  }
  if (group == ShardingPriority::kDistributed) {
    layout_.world = num_instances;
    layout_.rank = instance_id;
    distributed_ = true;
  } else {
    layout_.workers = num_instances;
    layout_.worker = instance_id;
    multiprocessing_ = true;
  }
}

bool GlobalSamplerSettings::sharded_for(ShardingPriority group) const noexcept {
  return group == ShardingPriority::kDistributed ? distributed_ : multiprocessing_;
}

void GlobalSamplerSettings::set_step(std::uint64_t span, bool drop_last) {
  if (span == 0) DPIPE_THROW(InvalidArgument, "global_order: a batch of 0 elements");
  if (step_set_ && (span != span_ || drop_last != drop_last_)) {
    DPIPE_THROW(InvalidArgument,
                "global_order: its steps already span {} positions{}; one global order has one batch size: build "
                "another global_order() for another batch",
                span_, drop_last_ ? " (drop_last)" : "");
  }
  span_ = span;
  drop_last_ = drop_last;
  step_set_ = true;
}

GlobalSchedule GlobalSamplerSettings::schedule(std::uint64_t size) const {
  return {size, span_, drop_last_, options_.tail, layout_, epoch_ ? epoch_->start_step : 0};
}

IndexPermutation GlobalSamplerSettings::permutation(std::uint64_t size) const {
  return IndexPermutation(options_.shuffle ? size : 0, key());
}

NodeSettings GlobalSamplerSettings::settings() const {
  return {{"shuffle", options_.shuffle ? "true" : "false"},
          {"tail", options_.tail == EpochTail::kDrop ? "drop" : "pad"},
          {"step", std::to_string(span_)},
          {"drop_last", drop_last_ ? "true" : "false"}};
}

// --- the steps and the end ---------------------------------------------------------------------------

GlobalSchedule upstream_schedule(const DataPipePtr& input, const std::string& label) {
  const auto sources = graph::find_dps<GlobalOrderSource>(graph::traverse_dps(input));
  if (sources.size() != 1) {
    DPIPE_THROW(InvalidArgument, "{}: expected one global_order() upstream, found {}", label, sources.size());
  }
  return sources.front()->schedule();
}

void throw_step_out_of_order(const std::string& label, std::uint64_t got, std::uint64_t expected) {
  DPIPE_THROW(Error, "dpipe internal error: {} got an element of step {} while it batches step {}", label, got,
              expected);
}

void GlobalEndState::start() {
  steps_ = 0;
  offset_ = 0;
  skip_.reset();
  if (resume_) {
    count_ = resume_->handed_out;
    skip_ = resume_->position;
    offset_ = resume_->position.offset;
    resume_.reset();
  } else {
    count_ = 0;
  }
  first_ = count_;
  remember();
}

std::uint64_t GlobalEndState::begin_step(std::uint64_t step) noexcept {
  offset_ = 0;
  if (!skip_ || step < skip_->step) return 0;
  const std::uint64_t skip = step == skip_->step ? skip_->offset : 0;
  skip_.reset();
  offset_ = skip;
  return skip;
}

void GlobalEndState::yielded(bool step_complete) noexcept {
  if (step_complete) {
    ++steps_;
    offset_ = 0;
  } else {
    ++offset_;
  }
  ++count_;
  remember();
}

GlobalPosition GlobalEndState::position_after(std::uint64_t handed_out, const std::string& label) const {
  if (handed_out > count_ || handed_out < first_ || count_ - handed_out >= kRemembered) {
    DPIPE_THROW(StateError,
                "{}: the trainer has had {} elements of the epoch, and this node yielded {} ({} remembered back); a "
                "node between it and the loader reads too far ahead for a global-order checkpoint",
                label, handed_out, count_, kRemembered);
  }
  const Local& local = remembered_[handed_out % kRemembered];
  return {start_step() + local.steps * (epoch_ ? epoch_->world : 1), local.offset};
}

}  // namespace detail

// --- graph functions ---------------------------------------------------------------------------------

namespace graph {

void set_global_epoch(const DataPipePtr& root, const GlobalEpoch& epoch) {
  for (const auto& node : find_dps<GlobalOrderNode>(traverse_dps(root))) node->set_global_epoch(epoch);
}

std::optional<GlobalEpoch> find_global_epoch(const DataPipePtr& root) {
  for (const auto& node : find_dps<GlobalOrderNode>(traverse_dps(root))) {
    if (auto epoch = node->global_epoch()) return epoch;
  }
  return std::nullopt;
}

GlobalOrderEnd* find_global_end(const DataPipePtr& root) {
  const auto ends = find_dps<GlobalOrderEnd>(traverse_dps(root));
  return ends.empty() ? nullptr : ends.front().get();
}

}  // namespace graph
}  // namespace dpipe

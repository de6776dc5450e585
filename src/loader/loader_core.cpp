// DataLoader2's protocol (LoaderCore): epochs, seeding, the iterator's grants, pause / resume /
// limit and shutdown. Its checkpoints are in loader_state.cpp.

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/global/global_epoch.hpp>
#include <dpipe/global/sampled.hpp>
#include <dpipe/graph/background.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/settings.hpp>
#include <dpipe/loader/loader_core.hpp>

#include "loader/loader_restore.hpp"
#include "loader/progress_reporter.hpp"

namespace dpipe::detail {
namespace {

/// A number for the calling thread, never 0.
std::uint64_t this_thread_token() noexcept {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t token = next.fetch_add(1, std::memory_order_relaxed);
  return token;
}

/// The root as an iter node; InvalidArgument when it is not one.
IterDataPipeBase& as_iter_base(const DataPipePtr& root) {
  auto* base = dynamic_cast<IterDataPipeBase*>(root.get());
  if (base == nullptr) {
    DPIPE_THROW(InvalidArgument, "DataLoader2 needs an iter pipe at the root, got {} ({})", root->label(),
                root->element_type());
  }
  return *base;
}

}  // namespace

void LoaderCore::Seeds::start_epoch() {
  if (seed) {
    if (reseed) {
      generator.seed(*seed);
      reseed = false;
    }
  } else {
    generator.seed();
  }
  epoch_start = generator;
}

LoaderCore::LoaderCore(DataPipePtr graph, const std::vector<AdapterPtr>& adapters,
                       const ReadingServiceInterface* service)
    : service_(service != nullptr ? service->clone() : nullptr),
      fresh_service_(service != nullptr ? service->clone() : nullptr) {
  if (!graph) DPIPE_THROW(InvalidArgument, "DataLoader2: the pipeline is empty (a default-constructed handle)");
  DataPipePtr root = graph::clone(graph);
  for (const auto& adapter : adapters) {
    if (!adapter) DPIPE_THROW(InvalidArgument, "DataLoader2: an adapter is null");
    root = (*adapter)(root);
  }
  (void)as_iter_base(root);
  set_graph(std::move(root));
  before_service_ = graph::clone(graph_);
}

LoaderCore::~LoaderCore() { shutdown(); }

void LoaderCore::set_graph(DataPipePtr graph) {
  if (graph == graph_) return;
  (void)as_iter_base(graph);
  graph_ = std::move(graph);
  ++root_version_;
}

void LoaderCore::adapt_once() {
  if (adapted_) return;
  set_graph(adapt(service_.get(), graph_, nullptr));
  adapted_ = true;
}

void LoaderCore::seed_graph(std::uint64_t epoch, std::uint64_t start_step) {
  // A global order's key: from the user's seed and the epoch alone when there is a seed, so that
  // every worker count and world size agrees; else from the epoch's generator (a distributed
  // service then shares rank 0's).
  SeedGenerator drawn = seeds_.epoch_start;
  const std::uint64_t base = seeds_.seed ? *seeds_.seed : drawn.generate_shared_seed();
  graph::set_global_epoch(graph_, GlobalEpoch{sample_seed(base, epoch), start_step, seeds_.seed.has_value()});
  if (service_) {
    if (auto reset = service_->initialize_iteration(seeds_.generator)) set_graph(reset(graph_));
  } else {
    graph::set_graph_random_seed(graph_, seeds_.generator);  // torchdata does not seed without a service (#1107)
  }
}

void LoaderCore::start_epoch() {
  seeds_.start_epoch();
  adapt_once();
  seed_graph(position_.epoch + 1);
  ++position_.epoch;
  position_.taken = 0;
  position_.ended = false;
  begin_iteration();
  log_debug("DataLoader2: epoch {} starts", position_.epoch);
}

void LoaderCore::begin_iteration() {
  as_iter_base(graph_).reset();
  ++iteration_;
  if (progress_) progress_->epoch_started(graph_, position_.epoch, position_.taken);
}

void LoaderCore::continue_restored(Restore& restore) {
  if (!restore.mid_epoch()) {
    start_epoch();
    return;
  }
  if (restore.mode == GraphMode::kReplay || restore.mode == GraphMode::kReplayFailed) {
    log_warning("DataLoader2: the checkpoint {}; replaying {} elements of epoch {} to restore the position",
                restore.mode == GraphMode::kReplayFailed
                    ? "was saved after the epoch failed"
                    : "holds no state for some node (it does not implement save_state)",
                restore.taken, restore.epoch);
    seeds_.generator = seeds_.epoch_start;  // the generator as the saved epoch started: the same seeds again
    seed_graph(restore.epoch);
    replay_ = restore.taken;
  }
  if (restore.mode == GraphMode::kGlobal) {
    // The epoch's seeds again, and the global stream from where the trainer stood.
    seeds_.generator = seeds_.epoch_start;
    seed_graph(restore.epoch, restore.global.step);
  }
  position_ = Position{restore.epoch, restore.taken, false};
  paused_ = restore.paused;
  begin_iteration();  // continues the iteration load_state_dict() restored, or starts the epoch's replay
  log_debug("DataLoader2: epoch {} continues after {} restored elements", position_.epoch, position_.taken);
}

std::uint64_t LoaderCore::start_iterator() {
  if (terminated_) DPIPE_THROW(UsageError, "Cannot iterate over the DataLoader as it has already been shut down");
  if (reset_iter_) {
    loaded_blob_.clear();
    if (restore_) {
      auto restore = std::move(restore_);
      continue_restored(*restore);
    } else {
      start_epoch();
    }
    reset_iter_ = false;
  }
  valid_iterator_ = valid_iterator_ ? *valid_iterator_ + 1 : 0;
  limit_ = Limit{};
  return *valid_iterator_;
}

std::uint64_t LoaderCore::take_replay() { return std::exchange(replay_, 0); }

std::uint64_t LoaderCore::grant(std::uint64_t id) {
  if (!valid_iterator_ || id != *valid_iterator_) {
    if (service_) service_->finalize_iteration();
    DPIPE_THROW(UsageError,
                "This iterator has been invalidated because another iterator has been created from the same "
                "DataLoader2.\nThis may be caused multiple references to the same DataLoader2. For feedback regarding "
                "this single iterator per DataLoader2 constraint, feel free to comment on this issue: "
                "https://github.com/pytorch/data/issues/45.");
  }
  if (terminated_) DPIPE_THROW(UsageError, "Cannot iterate over the DataLoader as it has already been shut down");
  reset_iter_ = true;
  if (paused_) return 0;
  // The rest of a limit; at least one element, as a limit of 0 pauses after the next one.
  if (limit_.limit) return std::max<std::uint64_t>(1, *limit_.limit - std::min(limit_.counted, *limit_.limit));
  return std::numeric_limits<std::uint64_t>::max();
}

void LoaderCore::handed_out(std::uint64_t count) {
  position_.taken += count;
  if (progress_) [[unlikely]]
    progress_->handed_out(graph_, position_.taken, count);
  if (!limit_.limit) return;
  limit_.counted += static_cast<std::size_t>(count);
  if (limit_.counted >= *limit_.limit && !paused_) {
    pause();
    limit_.counted = 0;
  }
}

void LoaderCore::reached_end() {
  if (position_.ended) return;
  position_.ended = true;
  if (position_.taken == 0) {
    log_warning("DataLoader2: epoch {} yielded no elements (an empty source, or a filter or shard that keeps nothing)",
                position_.epoch);
  }
  if (service_) service_->finalize_iteration();
  if (progress_) progress_->epoch_ended(graph_, position_.taken);
}

std::optional<std::size_t> LoaderCore::epoch_length() const {
  if (!service_) return as_iter_base(before_service_).length();
  return service_->epoch_length(before_service_);
}

void LoaderCore::report_progress(std::optional<ProgressOptions> options) {
  std::unique_ptr<ProgressReporter> next;
  if (options) next = std::make_unique<ProgressReporter>(std::move(*options), epoch_length());  // may throw
  if (progress_) progress_->stop(graph_);
  progress_ = std::move(next);
  if (progress_ && valid_iterator_ && !position_.ended) {
    progress_->epoch_started(graph_, position_.epoch, position_.taken);
  }
}

void LoaderCore::fail() noexcept {
  failed_ = true;
  shutdown();
}

bool LoaderCore::enter(const char* operation) const {
  std::atomic_ref<std::uint64_t> user(user_);
  const std::uint64_t me = this_thread_token();
  std::uint64_t expected = 0;
  if (user.compare_exchange_strong(expected, me, std::memory_order_acquire, std::memory_order_relaxed)) return true;
  if (expected == me) return false;  // a nested call of the same thread
  DPIPE_THROW(UsageError,
              "DataLoader2: {} was called while another thread is using the loader; a DataLoader2 is used by one "
              "thread at a time: give each thread its own loader, or guard it with a mutex",
              operation);
}

void LoaderCore::leave() const noexcept { std::atomic_ref<std::uint64_t>(user_).store(0, std::memory_order_release); }

void LoaderCore::seed(std::uint64_t seed) {
  seeds_.seed = seed;
  seeds_.reseed = true;
}

void LoaderCore::stop_background() noexcept {
  try {
    graph::BackgroundStop(graph_).keep_stopped();
  } catch (const std::exception& error) {
    log_warning("DataLoader2: stopping the graph's background work failed: {}", error.what());
  }
}

void LoaderCore::shutdown() noexcept {
  if (terminated_) return;
  terminated_ = true;
  reset_iter_ = true;
  try {
    if (service_) {
      service_->finalize_iteration();
      service_->finalize();
    }
  } catch (const std::exception& error) {
    log_warning("DataLoader2: the reading service failed to finalize: {}", error.what());
  }
  if (stopped_) stopped_->keep_stopped();  // a paused loader's threads stay stopped: no restart to stop them again
  stopped_.reset();
  stop_background();
}

void LoaderCore::pause() {
  if (service_ && !service_->supports_pause()) {
    log_warning("ReadingService doesn't support `pause`.");
    return;
  }
  paused_ = true;
  if (service_) {
    if (auto paused = service_->pause()) set_graph(paused(graph_));
  } else if (!stopped_) {
    stopped_ = std::make_unique<graph::BackgroundStop>(graph_);
  }
}

void LoaderCore::resume() {
  if (service_ && !service_->supports_pause()) {
    log_warning("ReadingService doesn't support `resume`.");
    return;
  }
  if (!paused_) {
    log_warning("Resume is called when `DataLoader2` is not paused. No operation is performed.");
    return;
  }
  if (service_) {
    if (auto resumed = service_->resume()) set_graph(resumed(graph_));
  } else {
    stopped_.reset();
  }
  paused_ = false;
}

void LoaderCore::limit(std::optional<std::size_t> num_batches) {
  limit_ = Limit{num_batches, 0};
  if (!service_) return;
  if (!service_->supports_limit()) {
    log_warning("ReadingService doesn't support `limit`.");
    return;
  }
  if (auto limited = service_->limit(num_batches)) set_graph(limited(graph_));
}

void throw_loader_type_mismatch(const DataPipe& root, const std::string& expected) {
  DPIPE_THROW(InvalidArgument, "DataLoader2 of {}: the reading service left {} at the root, which yields {}", expected,
              root.label(), root.element_type());
}

}  // namespace dpipe::detail

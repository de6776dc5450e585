// DataLoader2's protocol (LoaderCore): epochs, seeding, pause/resume/limit, shutdown, and the
// loader's checkpoint blob.

#include <array>
#include <cstring>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/dataloader2.hpp>
#include <dpipe/graph/linter.hpp>
#include <dpipe/graph/settings.hpp>
#include <dpipe/graph/state.hpp>

#include "blob.hpp"

namespace dpipe::detail {
namespace {

constexpr Magic kMagic = {'D', 'P', 'I', 'P', 'E', 'D', 'L', '2'};
constexpr std::uint32_t kFormatVersion = 1;
constexpr const char* kWhat = "DataLoader2 checkpoint";

/// How a checkpoint restores the graph.
enum class GraphMode : std::uint8_t {
  kNotStarted = 0,  // saved before the first iteration
  kState = 1,       // every node's state
  kReplay = 2,      // a node cannot save its state: replay the epoch from its seeds and skip
};

IterDataPipeBase& as_iter_base(const DataPipePtr& root) {
  auto* base = dynamic_cast<IterDataPipeBase*>(root.get());
  if (base == nullptr) {
    DPIPE_THROW(InvalidArgument, "DataLoader2 needs an iter pipe at the root, got {} ({})", root->label(),
                root->element_type());
  }
  return *base;
}

}  // namespace

/// What load_state_dict read, applied at the next iteration.
struct LoaderCore::Restore {
  GraphMode mode = GraphMode::kNotStarted;
  std::uint64_t epoch = 0;
  std::uint64_t taken = 0;
  bool epoch_ended = false;
  bool paused = false;
  std::vector<std::byte> graph_state;
  std::optional<std::vector<std::byte>> service_state;
};

LoaderCore::LoaderCore(DataPipePtr graph, const std::vector<AdapterPtr>& adapters, const AdapterContext& context,
                       const ReadingServiceInterface* service)
    : service_(service != nullptr ? service->clone() : nullptr) {
  if (!graph) DPIPE_THROW(InvalidArgument, "DataLoader2: the pipeline is empty (a default-constructed handle)");
  DataPipePtr root = graph::clone(graph);
  for (const auto& adapter : adapters) {
    if (!adapter) DPIPE_THROW(InvalidArgument, "DataLoader2: an adapter is null");
    root = (*adapter)(root, context);
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

void LoaderCore::adapt_once(const Restore* restore) {
  if (adapted_) return;
  if (!graph::check_shuffle_before_sharding(graph_)) {
    log_warning(
        "DataLoader2: a sharding_filter has no shuffle upstream of it on every path: each worker or rank would see "
        "its share in the source's order. Put shuffle() before sharding_filter() to mix the data across shards.");
  }
  log_debug("DataLoader2: initializing {}", service_ ? "the reading service" : "without a reading service");
  if (service_) {
    if (restore != nullptr && restore->service_state) {
      auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(service_.get());
      if (checkpointable == nullptr) DPIPE_THROW(StateError, "Cannot restore from non-checkpointable reading service");
      set_graph(checkpointable->restore(graph_, *restore->service_state));
    } else {
      set_graph(service_->initialize(graph_));
    }
  }
  adapted_ = true;
}

void LoaderCore::start_epoch() {
  if (seed_) {
    if (reset_seed_) {
      seeds_.seed(*seed_);
      reset_seed_ = false;
    }
  } else {
    seeds_.seed();
  }
  initial_seeds_ = seeds_;
  adapt_once(nullptr);
  if (service_) {
    if (auto reset = service_->initialize_iteration(seeds_)) set_graph(reset(graph_));
  } else {
    graph::set_graph_random_seed(graph_, seeds_);  // torchdata does not seed without a service (#1107)
  }
  as_iter_base(graph_).reset();
  ++epoch_;
  taken_ = 0;
  epoch_ended_ = false;
  log_debug("DataLoader2: epoch {} starts", epoch_);
}

void LoaderCore::continue_restored(Restore& restore) {
  const bool mid_epoch = restore.mode != GraphMode::kNotStarted && !restore.epoch_ended;
  if (!mid_epoch) {
    adapt_once(&restore);
    start_epoch();
    return;
  }
  adapt_once(&restore);
  if (restore.mode == GraphMode::kState) {
    graph::load_state(graph_, restore.graph_state);
    as_iter_base(graph_).reset();  // continues the restored iteration
  } else {
    log_warning(
        "DataLoader2: the checkpoint holds no state for some node (it does not implement save_state); replaying "
        "{} elements of epoch {} to restore the position",
        restore.taken, restore.epoch);
    seeds_ = initial_seeds_;  // the generator as the saved epoch started: the same seeds again
    if (service_) {
      if (auto reset = service_->initialize_iteration(seeds_)) set_graph(reset(graph_));
    } else {
      graph::set_graph_random_seed(graph_, seeds_);
    }
    as_iter_base(graph_).reset();
    replay_ = restore.taken;
  }
  epoch_ = restore.epoch;
  taken_ = restore.taken;
  epoch_ended_ = false;
  paused_ = restore.paused;
  log_debug("DataLoader2: epoch {} continues after {} restored elements", epoch_, taken_);
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
  limit_.reset();
  limit_counter_ = 0;
  return *valid_iterator_;
}

std::uint64_t LoaderCore::take_replay() { return std::exchange(replay_, 0); }

bool LoaderCore::before_next(std::uint64_t id) {
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
  return !paused_;
}

void LoaderCore::after_next(bool produced) {
  if (!produced) {
    if (!epoch_ended_) {
      epoch_ended_ = true;
      if (service_) service_->finalize_iteration();
    }
    return;
  }
  ++taken_;
  if (limit_ && ++limit_counter_ >= *limit_ && !paused_) {
    pause();
    limit_counter_ = 0;
  }
}

void LoaderCore::fail() noexcept { shutdown(); }

void LoaderCore::seed(std::uint64_t seed) {
  seed_ = seed;
  reset_seed_ = true;
}

void LoaderCore::pause_graph() noexcept {
  try {
    for (const auto& node : graph::list_dps(graph::traverse_dps(graph_))) node->pause();
  } catch (const std::exception& error) {
    log_warning("DataLoader2: pausing the graph failed: {}", error.what());
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
  pause_graph();  // stops background threads
}

void LoaderCore::pause() {
  if (service_ && !service_->supports_pause()) {
    log_warning("ReadingService doesn't support `pause`.");
    return;
  }
  paused_ = true;
  if (service_) {
    if (auto paused = service_->pause()) set_graph(paused(graph_));
  } else {
    pause_graph();
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
    const auto nodes = graph::list_dps(graph::traverse_dps(graph_));
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) (*it)->resume();
  }
  paused_ = false;
}

void LoaderCore::limit(std::optional<std::size_t> num_batches) {
  limit_counter_ = 0;
  limit_ = num_batches;
  if (!service_) return;
  if (!service_->supports_limit()) {
    log_warning("ReadingService doesn't support `limit`.");
    return;
  }
  if (auto limited = service_->limit(num_batches)) set_graph(limited(graph_));
}

std::vector<std::byte> LoaderCore::state_dict() {
  if (!loaded_blob_.empty()) return loaded_blob_;
  std::vector<std::byte> blob;
  ByteWriter writer(blob);
  begin_blob(writer, kMagic, kFormatVersion);
  writer.write(graph::fingerprint(before_service_));
  writer.write(seed_);
  writer.write(reset_seed_);
  writer.write(seeds_);
  writer.write(initial_seeds_);
  writer.write(epoch_);
  writer.write(taken_);
  writer.write(epoch_ended_);
  writer.write(paused_);
  auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(service_.get());
  GraphMode mode = GraphMode::kNotStarted;
  std::vector<std::byte> graph_state;
  std::optional<std::vector<std::byte>> service_state;
  {
    // The service first: it may stop its graph (worker processes) so that the nodes here hold
    // exactly what the loop received; it restarts it once the graph's state is saved.
    struct Restart {
      CheckpointableReadingServiceInterface* service;
      ~Restart() {
        if (service == nullptr) return;
        try {
          service->resume_after_checkpoint();
        } catch (const std::exception& error) {
          log_warning("DataLoader2: the reading service failed to resume after a checkpoint: {}", error.what());
        }
      }
    } restart{checkpointable};
    try {
      if (checkpointable != nullptr) service_state = checkpointable->checkpoint();
      if (epoch_ > 0) {
        graph_state = graph::save_state(graph_);
        mode = GraphMode::kState;
      }
    } catch (const StateNotSupportedError& error) {
      log_warning("DataLoader2: {}; the checkpoint will replay the epoch to restore the position", error.what());
      mode = GraphMode::kReplay;
      graph_state.clear();
      service_state.reset();
    }
  }
  writer.write(static_cast<std::uint8_t>(mode));
  writer.write(graph_state);
  writer.write(service_state);
  seal_blob(blob);
  return blob;
}

void LoaderCore::load_state_dict(std::span<const std::byte> blob) {
  if (valid_iterator_) {
    DPIPE_THROW(UsageError,
                "DataLoaderV2 iterator has already been created, `load_state_dict()` can\u2019t be called. Please "
                "create a new dataloader in order to use load state dict.");
  }
  ByteReader reader = open_blob(blob, kMagic, kFormatVersion, kWhat);
  try {
    const auto saved_fingerprint = reader.read<std::uint64_t>();
    const auto expected = graph::fingerprint(before_service_);
    if (saved_fingerprint != expected) {
      DPIPE_THROW(StateError,
                  "the DataLoader2 checkpoint was saved from a different pipeline (graph fingerprint {:016x}, this "
                  "pipeline's is {:016x}); restore it into a loader built by the same code",
                  saved_fingerprint, expected);
    }
    auto seed = reader.read<std::optional<std::uint64_t>>();
    const auto reset_seed = reader.read<bool>();
    auto seeds = reader.read<SeedGenerator>();
    auto initial_seeds = reader.read<SeedGenerator>();
    auto restore = std::make_unique<Restore>();
    restore->epoch = reader.read<std::uint64_t>();
    restore->taken = reader.read<std::uint64_t>();
    restore->epoch_ended = reader.read<bool>();
    restore->paused = reader.read<bool>();
    const auto mode = reader.read<std::uint8_t>();
    if (mode > static_cast<std::uint8_t>(GraphMode::kReplay))
      DPIPE_THROW(StateError, "the DataLoader2 checkpoint is corrupt: unknown graph mode {}", mode);
    restore->mode = static_cast<GraphMode>(mode);
    restore->graph_state = reader.read<std::vector<std::byte>>();
    restore->service_state = reader.read<std::optional<std::vector<std::byte>>>();
    if (!reader.at_end())
      DPIPE_THROW(StateError, "the DataLoader2 checkpoint has {} trailing bytes", reader.remaining());
    if (restore->service_state && dynamic_cast<CheckpointableReadingServiceInterface*>(service_.get()) == nullptr) {
      DPIPE_THROW(StateError, "Cannot restore from non-checkpointable reading service");
    }
    seed_ = seed;
    reset_seed_ = reset_seed;
    seeds_ = seeds;
    initial_seeds_ = initial_seeds;
    restore_ = std::move(restore);
    loaded_blob_.assign(blob.begin(), blob.end());
  } catch (const SerializationError& error) {
    DPIPE_THROW(StateError, "the DataLoader2 checkpoint is corrupt: {}", error.what());
  }
}

void throw_loader_type_mismatch(const DataPipe& root, const std::string& expected) {
  DPIPE_THROW(InvalidArgument, "DataLoader2 of {}: the reading service left {} at the root, which yields {}", expected,
              root.label(), root.element_type());
}

}  // namespace dpipe::detail

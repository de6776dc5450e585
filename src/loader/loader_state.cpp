// DataLoader2's checkpoints (LoaderCore::state_dict / load_state_dict), and how a reading service
// rewrites the graph, fresh or restored. The keys are <dpipe/core/checkpoint_schema.hpp>'s.

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>

#include <dpipe/core/checkpoint_schema.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/global/global_epoch.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/linter.hpp>
#include <dpipe/graph/pipeline_record.hpp>
#include <dpipe/graph/state.hpp>
#include <dpipe/loader/loader_core.hpp>

#include "loader/loader_restore.hpp"

namespace dpipe::detail {
namespace {

namespace keys = checkpoint_schema::loader;
namespace job = checkpoint_schema::job;
using checkpoint_schema::kGraph;
using checkpoint_schema::kLoader;
using checkpoint_schema::kService;

/// The modes as the checkpoint spells them.
constexpr std::string_view kGraphModes[] = {"not started", "state", "replay", "replay after failure",
                                            "global position"};

/// What a checkpoint records of the service that saved it, for the message when another one loads
/// it: "no reading service", or the service's describe().
std::string describe_service(const ReadingServiceInterface* service) {
  return service == nullptr ? std::string("no reading service") : service->describe();
}

/// Throws StateError when the checkpoint's service state and this loader's service do not fit:
/// one keeps state of its own (worker processes) and the other does not.
void check_service(const std::string& saved, bool saved_service_state, GraphMode mode,
                   const ReadingServiceInterface* here) {
  const bool checkpointable = dynamic_cast<const CheckpointableReadingServiceInterface*>(here) != nullptr;
  if (saved_service_state == checkpointable || (!saved_service_state && mode != GraphMode::kState)) return;
  DPIPE_THROW(StateError,
              "the checkpoint was saved by a loader with {}, this loader has {}: {}; build the loader with the "
              "reading service the checkpoint was saved with (the same worker count) to resume it",
              saved, describe_service(here),
              saved_service_state ? "it cannot restore the state of that service (its worker processes)"
                                  : "the checkpoint holds no state for this service (its worker processes)");
}

/// Throws StateError for a field of `store` outside the loader's, the graph's and the service's
/// scopes.
void check_scopes(const StateStore& store) {
  const std::string prefixes[] = {std::string(kLoader) + ":", std::string(kGraph) + "/", std::string(kService) + ":",
                                  std::string(kService) + "/"};
  for (const auto& field : store.fields()) {
    const std::string_view key = field.key;
    if (std::ranges::none_of(prefixes, [&](const std::string& prefix) { return key.starts_with(prefix); })) {
      DPIPE_THROW(StateError, "the checkpoint's field {} belongs to nothing in a DataLoader2", key);
    }
  }
}

}  // namespace

DataPipePtr LoaderCore::adapt(ReadingServiceInterface* service, DataPipePtr graph, const Restore* restore) {
  if (!graph::check_shuffle_before_sharding(graph)) {
    log_warning(
        "DataLoader2: a sharding_filter has no shuffle upstream of it on every path: each worker or rank would see "
        "its share in the source's order. Put shuffle() before sharding_filter() to mix the data across shards.");
  }
  for (const auto& label : graph::random_nodes_after_global_order(graph)) {
    log_warning(
        "DataLoader2: {} is random and follows the global order's end: each rank draws its own, so its output depends "
        "on the world size (docs/determinism.md)",
        label);
  }
  log_debug("DataLoader2: initializing {}", service != nullptr ? "the reading service" : "without a reading service");
  if (service == nullptr) return graph;
  if (restore == nullptr || !restore->service_state) return service->initialize(std::move(graph));
  auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(service);
  if (checkpointable == nullptr) DPIPE_THROW(StateError, "Cannot restore from non-checkpointable reading service");
  graph = checkpointable->restore(std::move(graph), StateReader(restore->store, std::string(kService)));
  if (const auto unread = restore->store.unread(kService); !unread.empty()) {
    DPIPE_THROW(StateError, "the checkpoint's field {} belongs to nothing in this reading service", unread.front());
  }
  return graph;
}

std::vector<std::byte> LoaderCore::state_dict(const std::function<void(ByteWriter&)>& write_read_ahead,
                                              bool failed_ahead) {
  if (!loaded_blob_.empty()) return loaded_blob_;
  StateStore store;
  StateWriter loader(store, std::string(kLoader));
  loader.write(keys::kPipeline, graph::record_pipeline(before_service_));
  loader.write(keys::kFingerprint, fingerprint_);
  loader.write(keys::kService, describe_service(service_.get()));
  loader.write(keys::kSeed, seeds_.seed);
  loader.write(keys::kResetSeed, seeds_.reseed);
  loader.write(keys::kSeeds, seeds_.generator);
  loader.write(keys::kInitialSeeds, seeds_.epoch_start);
  loader.write(keys::kEpoch, position_.epoch);
  loader.write(keys::kTaken, position_.taken);
  loader.write(keys::kEpochEnded, position_.ended);
  loader.write(keys::kPaused, paused_);
  auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(service_.get());
  GraphMode mode = GraphMode::kNotStarted;
  StateStore parts;  // the service's and the graph's fields, kept only if both can be saved
  const bool failed = failed_ || failed_ahead;
  if (failed) {
    // A node that threw may have consumed input it never yielded, and the workers are gone: the
    // position the trainer reached is the count of elements it received, which a replay restores.
    if (failed_) {
      log_warning(
          "DataLoader2: the epoch failed after {} elements; the checkpoint will replay the epoch to that position",
          position_.taken);
    } else {
      log_warning(
          "DataLoader2: the pipeline failed while the loader read ahead of element {} (the trainer has not met the "
          "failure yet); the checkpoint will replay the epoch to that position",
          position_.taken);
    }
    mode = GraphMode::kReplayFailed;
  } else if (auto* global = graph::find_global_end(graph_); global != nullptr && position_.epoch > 0) {
    // A global order's checkpoint is where the global stream stands, nothing of the workers or
    // ranks: it restores onto any of them. What the iterator read ahead is read again.
    const GlobalPosition position = global->position_after(position_.taken);
    loader.write(keys::kGlobalStep, position.step);
    loader.write(keys::kGlobalOffset, position.offset);
    mode = GraphMode::kGlobal;
  } else {
    // The service first: it may stop its graph (worker processes) so that the nodes here hold
    // exactly what they have received; it restarts it once the graph's state is saved.
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
      if (checkpointable != nullptr) {
        StateWriter service(parts, std::string(kService));
        checkpointable->checkpoint(service);
      }
      if (position_.epoch > 0) {
        graph::save_state(graph_, StateWriter(parts, std::string(kGraph)));
        if (write_read_ahead) {
          ByteWriter read_ahead = loader.field(keys::kReadAhead);
          write_read_ahead(read_ahead);
        }
        mode = GraphMode::kState;
      }
    } catch (const StateNotSupportedError& error) {
      log_warning("DataLoader2: {}; the checkpoint will replay the epoch to restore the position", error.what());
      mode = GraphMode::kReplay;
      parts = StateStore();
    }
  }
  loader.write(keys::kMode, std::string(kGraphModes[static_cast<std::size_t>(mode)]));
  loader.write(keys::kServiceState,
               checkpointable != nullptr && !failed && mode != GraphMode::kReplay && mode != GraphMode::kGlobal);
  store.merge(parts, "");
  return store.to_blob();
}

void LoaderCore::require_not_iterated() const {
  if (valid_iterator_) {
    DPIPE_THROW(UsageError,
                "DataLoaderV2 iterator has already been created, `load_state_dict()` can\u2019t be called. Please "
                "create a new dataloader in order to use load state dict.");
  }
}

void LoaderCore::load_state_dict(std::span<const std::byte> blob, const RestoreOptions& options,
                                 const std::function<void(ByteReader&)>& adopt_read_ahead) {
  require_not_iterated();
  restore(blob, options, adopt_read_ahead, fresh_service_ ? fresh_service_->clone() : nullptr);
}

void LoaderCore::restore(std::span<const std::byte> blob, const RestoreOptions& options,
                         const std::function<void(ByteReader&)>& adopt_read_ahead,
                         std::unique_ptr<ReadingServiceInterface> service) {
  auto restore = std::make_unique<Restore>();
  restore->store = StateStore::from_blob(blob);
  if (StateReader(restore->store, std::string(job::kScope)).has(job::kWorldSize)) {
    DPIPE_THROW(StateError,
                "the checkpoint holds the states of every rank of a job (DataLoader2::save_job_checkpoint): restore "
                "it with load_job_checkpoint() on every rank");
  }
  const StateReader loader(restore->store, std::string(kLoader));
  const auto mode = loader.read<std::string>(keys::kMode);
  const auto* found = std::ranges::find(kGraphModes, mode);
  if (found == std::end(kGraphModes)) {
    DPIPE_THROW(StateError, "the checkpoint's field loader:mode is corrupt: \"{}\" is no graph mode", mode);
  }
  restore->mode = static_cast<GraphMode>(found - std::begin(kGraphModes));
  const bool replays = restore->mode == GraphMode::kReplay || restore->mode == GraphMode::kReplayFailed;
  graph::check_pipeline(
      loader.read<std::vector<graph::PipelineNode>>(keys::kPipeline), graph::record_pipeline(before_service_),
      {.settings_only = replays, .accept_changed_source_length = options.accept_changed_source_length});
  if (const auto fingerprint = loader.read<std::string>(keys::kFingerprint); fingerprint != fingerprint_) {
    DPIPE_THROW(StateError,
                "the checkpoint was saved by a loader with the fingerprint \"{}\", this loader has \"{}\"; restore it "
                "into a loader built by the same code",
                fingerprint, fingerprint_);
  }
  Seeds seeds;
  seeds.seed = loader.read<std::optional<std::uint64_t>>(keys::kSeed);
  seeds.reseed = loader.read<bool>(keys::kResetSeed);
  seeds.generator = loader.read<SeedGenerator>(keys::kSeeds);
  seeds.epoch_start = loader.read<SeedGenerator>(keys::kInitialSeeds);
  restore->epoch = loader.read<std::uint64_t>(keys::kEpoch);
  restore->taken = loader.read<std::uint64_t>(keys::kTaken);
  restore->epoch_ended = loader.read<bool>(keys::kEpochEnded);
  restore->paused = loader.read<bool>(keys::kPaused);
  restore->service_state = loader.read<bool>(keys::kServiceState);
  check_service(loader.read<std::string>(keys::kService), restore->service_state, restore->mode, service_.get());
  if (restore->mode == GraphMode::kGlobal) {
    restore->global.step = loader.read<std::uint64_t>(keys::kGlobalStep);
    restore->global.offset = loader.read<std::uint64_t>(keys::kGlobalOffset);
  }
  if (loader.has(keys::kReadAhead)) loader.decode(keys::kReadAhead, adopt_read_ahead);
  check_scopes(restore->store);
  if (const auto unread = restore->store.unread(kLoader); !unread.empty()) {
    DPIPE_THROW(StateError, "the checkpoint's field {} belongs to nothing in a DataLoader2", unread.front());
  }
  // Everything else is applied now, to a copy of the pipeline and of the reading service (which
  // starts and restores its workers): a blob refused later would refuse here, and a refused blob
  // leaves the loader as it was.
  DataPipePtr graph = adapt(service.get(), graph::clone(before_service_), restore.get());
  if (restore->mid_epoch() && restore->mode == GraphMode::kState) {
    graph::load_state(graph, StateReader(restore->store, std::string(kGraph)));
  }
  if (restore->mid_epoch() && restore->mode == GraphMode::kGlobal) {
    auto* global = graph::find_global_end(graph);
    if (global == nullptr) {
      DPIPE_THROW(StateError,
                  "the checkpoint holds a global-order position; this loader's pipeline has no global order");
    }
    global->resume_at(restore->global, restore->taken);
  }
  restore->store = StateStore();
  if (adapted_ && service_) {
    try {
      service_->finalize();  // the workers of an earlier load_state_dict()
    } catch (const std::exception& error) {
      log_warning("DataLoader2: the reading service failed to finalize: {}", error.what());
    }
  }
  service_ = std::move(service);
  set_graph(std::move(graph));
  adapted_ = true;
  seeds_ = seeds;
  // What the trainer asks before its loop (epoch() to seed it): the restored position.
  position_.epoch = restore->epoch;
  position_.taken = restore->taken;
  restore_ = std::move(restore);
  loaded_blob_.assign(blob.begin(), blob.end());
}

}  // namespace dpipe::detail

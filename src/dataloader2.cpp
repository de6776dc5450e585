// DataLoader2's protocol (LoaderCore): epochs, seeding, pause/resume/limit, shutdown, and the
// loader's checkpoint blob.

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <string_view>
#include <typeinfo>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/dataloader2.hpp>
#include <dpipe/graph/background.hpp>
#include <dpipe/graph/linter.hpp>
#include <dpipe/graph/settings.hpp>
#include <dpipe/graph/state.hpp>
#include <dpipe/reading_service/multiprocessing.hpp>

#include "progress_reporter.hpp"

namespace dpipe::detail {
namespace {

/// How a checkpoint restores the graph.
enum class GraphMode : std::uint8_t {
  kNotStarted = 0,    // saved before the first iteration
  kState = 1,         // every node's state
  kReplay = 2,        // a node cannot save its state: replay the epoch from its seeds and skip
  kReplayFailed = 3,  // saved after the epoch failed: replay it like kReplay
};
/// The modes as the checkpoint spells them.
constexpr std::string_view kGraphModes[] = {"not started", "state", "replay", "replay after failure"};

IterDataPipeBase& as_iter_base(const DataPipePtr& root) {
  auto* base = dynamic_cast<IterDataPipeBase*>(root.get());
  if (base == nullptr) {
    DPIPE_THROW(InvalidArgument, "DataLoader2 needs an iter pipe at the root, got {} ({})", root->label(),
                root->element_type());
  }
  return *base;
}

/// What a checkpoint records of a node of the pipeline the loader was built from: a stateful node,
/// or one with settings (batch_size), by NodePath::settings_path (and configured_path).
struct PipelineNode {
  std::string path;
  std::string configured_path;
  std::string element_type;
  NodeSettings settings;
  DPIPE_FIELDS(path, configured_path, element_type, settings)
};

std::vector<PipelineNode> pipeline_nodes(const DataPipePtr& root) {
  std::vector<PipelineNode> nodes;
  for (const auto& entry : graph::node_paths(root)) {
    auto settings = entry.node->settings();
    if (entry.node->stateless() && settings.empty()) continue;
    nodes.push_back({entry.settings_path, entry.configured_path, entry.node->element_type(), std::move(settings)});
  }
  return nodes;
}

/// The nodes with settings of `nodes`, by configured_path: what a checkpoint that replays its
/// epoch must match (it restores no node state, so a node that only keeps state, such as a map
/// that skips failed elements, may come or go).
std::vector<PipelineNode> configured_nodes(const std::vector<PipelineNode>& nodes) {
  std::vector<PipelineNode> configured;
  for (const auto& node : nodes) {
    if (!node.settings.empty()) configured.push_back({node.configured_path, {}, node.element_type, node.settings});
  }
  return configured;
}

/// "a (int), b (long int)", at most four of them.
std::string describe_nodes(const std::vector<const PipelineNode*>& nodes) {
  constexpr std::size_t kShown = 4;
  std::string text;
  for (std::size_t i = 0; i < nodes.size() && i < kShown; ++i) {
    text += fmt::format("{}{} ({})", i == 0 ? "" : ", ", nodes[i]->path, nodes[i]->element_type);
  }
  if (nodes.size() > kShown) text += fmt::format(" and {} more", nodes.size() - kShown);
  return text;
}

/// The setting named `name` of `settings`, or nullptr.
const std::string* find_setting(const NodeSettings& settings, const std::string& name) {
  const auto found = std::ranges::find(settings, name, &NodeSettings::value_type::first);
  return found == settings.end() ? nullptr : &found->second;
}

/// The settings that differ between a checkpoint and this pipeline.
struct SettingChanges {
  std::vector<std::string> texts;  // "batch: batch_size 32 in the checkpoint, 16 here"
  bool length = false;             // a source's length is among them
};

/// Adds each setting of `saved` that `here` does not share to `changes`; a source's length only
/// unless `options` accept a changed one.
void compare_settings(const PipelineNode& saved, const PipelineNode& here, const RestoreOptions& options,
                      SettingChanges& changes) {
  const std::string none = "(none)";
  const auto add = [&](const std::string& name, const std::string& before, const std::string& now) {
    if (name == "length") {
      if (options.accept_changed_source_length) return;
      changes.length = true;
    }
    changes.texts.push_back(fmt::format("{}: {} {} in the checkpoint, {} here", saved.path, name, before, now));
  };
  for (const auto& [name, value] : saved.settings) {
    const std::string* ours = find_setting(here.settings, name);
    if (ours == nullptr || *ours != value) add(name, value, ours != nullptr ? *ours : none);
  }
  for (const auto& [name, value] : here.settings) {
    if (find_setting(saved.settings, name) == nullptr) add(name, none, value);
  }
}

/// Throws StateError naming the nodes only the saved pipeline has, those only this one has, those
/// whose element type changed, and the settings that changed. Stateless nodes without settings
/// may differ.
void check_pipeline(const std::vector<PipelineNode>& saved, const std::vector<PipelineNode>& here,
                    const RestoreOptions& options) {
  std::map<std::string_view, const PipelineNode*> here_by_path;
  for (const auto& node : here) here_by_path.emplace(node.path, &node);
  std::vector<const PipelineNode*> only_saved;
  std::vector<std::string> retyped;
  SettingChanges changed_settings;
  for (const auto& node : saved) {
    const auto found = here_by_path.find(node.path);
    if (found == here_by_path.end()) {
      only_saved.push_back(&node);
      continue;
    }
    // An older dpipe may have saved a type's long spelling: compare the names users write.
    const std::string saved_type = detail::tidy_type_name(node.element_type);
    if (found->second->element_type != saved_type) {
      retyped.push_back(
          fmt::format("{} yields {} in the checkpoint, {} here", node.path, saved_type, found->second->element_type));
    }
    compare_settings(node, *found->second, options, changed_settings);
    here_by_path.erase(found);
  }
  std::vector<const PipelineNode*> only_here;
  for (const auto& node : here) {
    if (here_by_path.contains(node.path)) only_here.push_back(&node);
  }
  std::vector<std::string> differences;
  if (!only_saved.empty()) differences.push_back("only in the checkpoint: " + describe_nodes(only_saved));
  if (!only_here.empty()) differences.push_back("only in this pipeline: " + describe_nodes(only_here));
  for (auto& change : retyped) differences.push_back(std::move(change));
  if (!differences.empty()) {
    DPIPE_THROW(StateError,
                "the checkpoint was saved from a different pipeline (nodes by path; {}); restore it into a loader "
                "built by the same code",
                fmt::join(differences, "; "));
  }
  if (changed_settings.texts.empty()) return;
  DPIPE_THROW(StateError,
              "the checkpoint was saved from a pipeline with other settings ({}); restore it into a loader built with "
              "the same settings{}",
              fmt::join(changed_settings.texts, "; "),
              changed_settings.length ? ", or accept a source whose length changed on purpose with "
                                        "RestoreOptions::accept_changed_source_length"
                                      : "");
}

/// "dpipe::MultiProcessingReadingService with 2 worker processes", "no reading service": what a
/// checkpoint records of the service that saved it, for the message when another one loads it.
std::string describe_service(const ReadingServiceInterface* service) {
  if (service == nullptr) return "no reading service";
  std::string text = demangle(typeid(*service).name());
  if (const auto* workers = dynamic_cast<const MultiProcessingReadingService*>(service)) {
    text += fmt::format(" with {} worker processes", workers->options().num_workers);
  }
  return text;
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

}  // namespace

/// What load_state_dict read, applied at the next iteration.
struct LoaderCore::Restore {
  GraphMode mode = GraphMode::kNotStarted;
  std::uint64_t epoch = 0;
  std::uint64_t taken = 0;
  bool epoch_ended = false;
  bool paused = false;
  bool service_state = false;
  StateStore store;  // the graph's and the service's fields

  /// Whether the checkpoint was saved inside an epoch, which the next iteration continues.
  [[nodiscard]] bool mid_epoch() const noexcept { return mode != GraphMode::kNotStarted && !epoch_ended; }
};

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

DataPipePtr LoaderCore::adapt(ReadingServiceInterface* service, DataPipePtr graph, const Restore* restore) {
  if (!graph::check_shuffle_before_sharding(graph)) {
    log_warning(
        "DataLoader2: a sharding_filter has no shuffle upstream of it on every path: each worker or rank would see "
        "its share in the source's order. Put shuffle() before sharding_filter() to mix the data across shards.");
  }
  log_debug("DataLoader2: initializing {}", service != nullptr ? "the reading service" : "without a reading service");
  if (service == nullptr) return graph;
  if (restore == nullptr || !restore->service_state) return service->initialize(std::move(graph));
  auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(service);
  if (checkpointable == nullptr) DPIPE_THROW(StateError, "Cannot restore from non-checkpointable reading service");
  graph = checkpointable->restore(std::move(graph), StateReader(restore->store, "service"));
  if (const auto unread = restore->store.unread("service"); !unread.empty()) {
    DPIPE_THROW(StateError, "the checkpoint's field {} belongs to nothing in this reading service", unread.front());
  }
  return graph;
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
  adapt_once();
  if (service_) {
    if (auto reset = service_->initialize_iteration(seeds_)) set_graph(reset(graph_));
  } else {
    graph::set_graph_random_seed(graph_, seeds_);  // torchdata does not seed without a service (#1107)
  }
  ++epoch_;
  taken_ = 0;
  epoch_ended_ = false;
  begin_iteration();
  log_debug("DataLoader2: epoch {} starts", epoch_);
}

void LoaderCore::begin_iteration() {
  as_iter_base(graph_).reset();
  if (progress_) progress_->epoch_started(graph_, epoch_, taken_);
}

void LoaderCore::continue_restored(Restore& restore) {
  if (!restore.mid_epoch()) {
    start_epoch();
    return;
  }
  if (restore.mode != GraphMode::kState) {
    log_warning("DataLoader2: the checkpoint {}; replaying {} elements of epoch {} to restore the position",
                restore.mode == GraphMode::kReplayFailed
                    ? "was saved after the epoch failed"
                    : "holds no state for some node (it does not implement save_state)",
                restore.taken, restore.epoch);
    seeds_ = initial_seeds_;  // the generator as the saved epoch started: the same seeds again
    if (service_) {
      if (auto reset = service_->initialize_iteration(seeds_)) set_graph(reset(graph_));
    } else {
      graph::set_graph_random_seed(graph_, seeds_);
    }
    replay_ = restore.taken;
  }
  epoch_ = restore.epoch;
  taken_ = restore.taken;
  epoch_ended_ = false;
  paused_ = restore.paused;
  begin_iteration();  // continues the iteration load_state_dict() restored, or starts the epoch's replay
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
      if (progress_) progress_->epoch_ended(graph_, taken_);
    }
    return;
  }
  ++taken_;
  if (progress_) [[unlikely]]
    progress_->element(graph_, taken_);
  if (limit_ && ++limit_counter_ >= *limit_ && !paused_) {
    pause();
    limit_counter_ = 0;
  }
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
  if (progress_ && valid_iterator_ && !epoch_ended_) progress_->epoch_started(graph_, epoch_, taken_);
}

void LoaderCore::fail() noexcept {
  failed_ = true;
  shutdown();
}

namespace {

/// A number for the calling thread, never 0.
std::uint64_t this_thread_token() noexcept {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t token = next.fetch_add(1, std::memory_order_relaxed);
  return token;
}

}  // namespace

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
  seed_ = seed;
  reset_seed_ = true;
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
  StateStore store;
  StateWriter loader(store, "loader");
  loader.write("pipeline", pipeline_nodes(before_service_));
  loader.write("fingerprint", fingerprint_);
  loader.write("service", describe_service(service_.get()));
  loader.write("seed", seed_);
  loader.write("reset_seed", reset_seed_);
  loader.write("seeds", seeds_);
  loader.write("initial_seeds", initial_seeds_);
  loader.write("epoch", epoch_);
  loader.write("taken", taken_);
  loader.write("epoch_ended", epoch_ended_);
  loader.write("paused", paused_);
  auto* checkpointable = dynamic_cast<CheckpointableReadingServiceInterface*>(service_.get());
  GraphMode mode = GraphMode::kNotStarted;
  StateStore parts;  // the service's and the graph's fields, kept only if both can be saved
  if (failed_) {
    // A node that threw may have consumed input it never yielded, and the workers are gone: the
    // position the trainer reached is the count of elements it received, which a replay restores.
    log_warning(
        "DataLoader2: the epoch failed after {} elements; the checkpoint will replay the epoch to that position",
        taken_);
    mode = GraphMode::kReplayFailed;
  } else {
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
      if (checkpointable != nullptr) {
        StateWriter service(parts, "service");
        checkpointable->checkpoint(service);
      }
      if (epoch_ > 0) {
        graph::save_state(graph_, StateWriter(parts, "graph"));
        mode = GraphMode::kState;
      }
    } catch (const StateNotSupportedError& error) {
      log_warning("DataLoader2: {}; the checkpoint will replay the epoch to restore the position", error.what());
      mode = GraphMode::kReplay;
      parts = StateStore();
    }
  }
  loader.write("mode", std::string(kGraphModes[static_cast<std::size_t>(mode)]));
  loader.write("service_state", checkpointable != nullptr && !failed_ && mode != GraphMode::kReplay);
  store.merge(parts, "");
  return store.to_blob();
}

void LoaderCore::load_state_dict(std::span<const std::byte> blob, const RestoreOptions& options) {
  if (valid_iterator_) {
    DPIPE_THROW(UsageError,
                "DataLoaderV2 iterator has already been created, `load_state_dict()` can\u2019t be called. Please "
                "create a new dataloader in order to use load state dict.");
  }
  auto restore = std::make_unique<Restore>();
  restore->store = StateStore::from_blob(blob);
  const StateReader loader(restore->store, "loader");
  const auto mode = loader.read<std::string>("mode");
  const auto* found = std::ranges::find(kGraphModes, mode);
  if (found == std::end(kGraphModes)) {
    DPIPE_THROW(StateError, "the checkpoint's field loader:mode is corrupt: \"{}\" is no graph mode", mode);
  }
  restore->mode = static_cast<GraphMode>(found - std::begin(kGraphModes));
  const auto saved_pipeline = loader.read<std::vector<PipelineNode>>("pipeline");
  if (restore->mode == GraphMode::kReplay || restore->mode == GraphMode::kReplayFailed) {
    check_pipeline(configured_nodes(saved_pipeline), configured_nodes(pipeline_nodes(before_service_)), options);
  } else {
    check_pipeline(saved_pipeline, pipeline_nodes(before_service_), options);
  }
  if (const auto fingerprint = loader.read<std::string>("fingerprint"); fingerprint != fingerprint_) {
    DPIPE_THROW(StateError,
                "the checkpoint was saved by a loader with the fingerprint \"{}\", this loader has \"{}\"; restore it "
                "into a loader built by the same code",
                fingerprint, fingerprint_);
  }
  auto seed = loader.read<std::optional<std::uint64_t>>("seed");
  const auto reset_seed = loader.read<bool>("reset_seed");
  auto seeds = loader.read<SeedGenerator>("seeds");
  auto initial_seeds = loader.read<SeedGenerator>("initial_seeds");
  restore->epoch = loader.read<std::uint64_t>("epoch");
  restore->taken = loader.read<std::uint64_t>("taken");
  restore->epoch_ended = loader.read<bool>("epoch_ended");
  restore->paused = loader.read<bool>("paused");
  restore->service_state = loader.read<bool>("service_state");
  check_service(loader.read<std::string>("service"), restore->service_state, restore->mode, service_.get());
  for (const auto& field : restore->store.fields()) {
    const std::string_view key = field.key;
    const bool known = key.starts_with("loader:") || key.starts_with("graph/") || key.starts_with("service:") ||
                       key.starts_with("service/");
    if (!known) DPIPE_THROW(StateError, "the checkpoint's field {} belongs to nothing in a DataLoader2", key);
  }
  if (const auto unread = restore->store.unread("loader"); !unread.empty()) {
    DPIPE_THROW(StateError, "the checkpoint's field {} belongs to nothing in a DataLoader2", unread.front());
  }
  // Everything else is applied now, to a copy of the pipeline and of the reading service (which
  // starts and restores its workers): a blob refused later would refuse here, and a refused blob
  // leaves the loader as it was.
  auto service = fresh_service_ ? fresh_service_->clone() : nullptr;
  DataPipePtr graph = adapt(service.get(), graph::clone(before_service_), restore.get());
  if (restore->mid_epoch() && restore->mode == GraphMode::kState) {
    graph::load_state(graph, StateReader(restore->store, "graph"));
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
  seed_ = seed;
  reset_seed_ = reset_seed;
  seeds_ = seeds;
  initial_seeds_ = initial_seeds;
  // What the trainer asks before its loop (epoch() to seed it): the restored position.
  epoch_ = restore->epoch;
  taken_ = restore->taken;
  restore_ = std::move(restore);
  loaded_blob_.assign(blob.begin(), blob.end());
}

void throw_loader_type_mismatch(const DataPipe& root, const std::string& expected) {
  DPIPE_THROW(InvalidArgument, "DataLoader2 of {}: the reading service left {} at the root, which yields {}", expected,
              root.label(), root.element_type());
}

}  // namespace dpipe::detail

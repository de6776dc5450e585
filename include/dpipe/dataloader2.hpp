#pragma once
/// \file
/// DataLoader2<T> (torchdata's DataLoader2): owns a copy of a pipeline and of a reading service and
/// runs the pipeline epoch after epoch: `for (auto& batch : loader) train_step(batch);`.
///
/// It follows torchdata's epoch protocol: the service's initialize() at the first iteration,
/// initialize_iteration() at every epoch, finalize_iteration() at the end of an epoch (and on a
/// stale iterator), finalize() at shutdown. Iterating again after any element was taken starts a
/// new epoch; a new iterator invalidates the previous one; an exception from the pipeline shuts the
/// loader down and reaches the caller with its own type.
///
/// Beyond torchdata: state_dict() / load_state_dict() restore exactly mid-epoch (see
/// docs/checkpointing.md); without a reading service the loader still seeds the graph every epoch
/// (torchdata's issue #1107) and still supports pause, resume and limit.
///
/// Thread-safety: one thread uses a loader and its iterators.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <dpipe/adapter.hpp>
#include <dpipe/core/detail/lazy_iterator.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/map_pipe.hpp>
#include <dpipe/core/root_ops.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/iter/fullsync.hpp>
#include <dpipe/iter/prefetch.hpp>
#include <dpipe/iter/shuffle.hpp>
#include <dpipe/progress.hpp>
#include <dpipe/reading_service/reading_service.hpp>

namespace dpipe {
class MultiProcessingReadingService;
class InProcessReadingService;
namespace graph {
class BackgroundStop;
}  // namespace graph

/// How DataLoader2::load_state_dict() treats a checkpoint.
struct RestoreOptions {
  /// Restore a checkpoint whose sources had another length (a dataset that grew or shrank on
  /// purpose): the saved positions continue in the new data. Other settings must still match.
  bool accept_changed_source_length = false;
};

namespace detail {

class ProgressReporter;

/// DataLoader2's protocol, independent of the element type. Thread-safety: one thread at a time,
/// which enter() checks.
class LoaderCore {
 public:
  LoaderCore(DataPipePtr graph, const std::vector<AdapterPtr>& adapters, const ReadingServiceInterface* service);
  ~LoaderCore();
  LoaderCore(const LoaderCore&) = delete;
  LoaderCore& operator=(const LoaderCore&) = delete;

  /// torchdata's __iter__: starts a new epoch when needed and returns the new iterator's id.
  std::uint64_t start_iterator();
  /// Elements the typed layer must read and drop before handing any out (replaying a restored
  /// epoch for nodes without state support); resets to 0.
  std::uint64_t take_replay();
  /// Before a read through iterator `id`. Throws for a stale iterator; false when paused.
  bool before_next(std::uint64_t id);
  /// After a read: an element (true) or the end of the epoch (false).
  void after_next(bool produced);
  /// The pipeline threw: shut down (the caller rethrows). state_dict() then saves the position of
  /// the last element handed out, restored by replaying the epoch.
  void fail() noexcept;

  /// Marks the loader as used by the calling thread until leave(). Throws UsageError naming
  /// `operation` when another thread is using it (a loader is not thread-safe; this turns a data
  /// race into an error). Calls nest within one thread; returns whether this one took the loader
  /// and must leave() it. Costs one atomic compare-exchange.
  [[nodiscard]] bool enter(const char* operation) const;
  void leave() const noexcept;

  /// The graph being run (after the reading service), and a counter of its changes.
  [[nodiscard]] const DataPipePtr& root() const noexcept { return graph_; }
  [[nodiscard]] std::uint64_t root_version() const noexcept { return root_version_; }

  void seed(std::uint64_t seed);
  void shutdown() noexcept;
  void pause();
  void resume();
  void limit(std::optional<std::size_t> num_batches);
  [[nodiscard]] std::vector<std::byte> state_dict();
  void load_state_dict(std::span<const std::byte> blob, const RestoreOptions& options);
  void set_fingerprint(std::string fingerprint) { fingerprint_ = std::move(fingerprint); }
  [[nodiscard]] std::optional<std::size_t> epoch_length() const;
  void report_progress(std::optional<ProgressOptions> options);

  [[nodiscard]] const DataPipePtr& graph_before_reading_service() const noexcept { return before_service_; }
  [[nodiscard]] ReadingServiceInterface* reading_service() const noexcept { return service_.get(); }
  [[nodiscard]] bool terminated() const noexcept { return terminated_; }
  [[nodiscard]] bool paused() const noexcept { return paused_; }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }
  [[nodiscard]] std::uint64_t elements_in_epoch() const noexcept { return taken_; }

 private:
  struct Restore;

  void set_graph(DataPipePtr graph);
  /// Runs the reading service's initialize() (or restore(), for a checkpoint) once.
  void adapt_once();
  /// `graph` as `service` rewrites it: initialized, or restored from `restore`.
  [[nodiscard]] static DataPipePtr adapt(ReadingServiceInterface* service, DataPipePtr graph, const Restore* restore);
  void start_epoch();
  void continue_restored(Restore& restore);
  /// Resets the graph's iteration (the epoch starts, or continues a restored one) and tells the
  /// progress reporter.
  void begin_iteration();
  void stop_background() noexcept;

  DataPipePtr graph_;
  DataPipePtr before_service_;
  std::unique_ptr<ReadingServiceInterface> service_;
  std::unique_ptr<ReadingServiceInterface> fresh_service_;  // never used: load_state_dict() restores a copy
  std::uint64_t root_version_ = 0;
  bool adapted_ = false;
  bool reset_iter_ = true;
  bool terminated_ = false;
  bool paused_ = false;
  std::optional<std::uint64_t> valid_iterator_;
  SeedGenerator seeds_;
  SeedGenerator initial_seeds_;
  std::optional<std::uint64_t> seed_;
  bool reset_seed_ = true;
  std::uint64_t epoch_ = 0;  // epochs started
  std::uint64_t taken_ = 0;  // elements handed out in the current epoch
  bool epoch_ended_ = false;
  bool failed_ = false;  // the pipeline threw (see fail())
  std::optional<std::size_t> limit_;
  std::size_t limit_counter_ = 0;
  std::uint64_t replay_ = 0;
  std::unique_ptr<Restore> restore_;
  std::unique_ptr<graph::BackgroundStop> stopped_;  // paused without a reading service
  std::vector<std::byte> loaded_blob_;              // returned by state_dict() until the first iteration
  std::string fingerprint_;                         // the user's, compared at load_state_dict()
  std::unique_ptr<ProgressReporter> progress_;      // while reporting progress
  alignas(8) mutable std::uint64_t user_ = 0;       // the thread using the loader, 0: none (see enter())
};

/// Uses a loader for the scope of one public operation (LoaderCore::enter / leave).
class LoaderUse {
 public:
  LoaderUse(const LoaderCore& core, const char* operation) : core_(core), entered_(core.enter(operation)) {}
  ~LoaderUse() {
    if (entered_) core_.leave();
  }
  LoaderUse(const LoaderUse&) = delete;
  LoaderUse& operator=(const LoaderUse&) = delete;

 private:
  const LoaderCore& core_;
  bool entered_;
};

[[noreturn]] void throw_loader_type_mismatch(const DataPipe& root, const std::string& expected);

}  // namespace detail

template <class T>
class DataLoader2 {
  struct Reader;

 public:
  /// Reads lazily (inside a range-for body the loader has handed out exactly the elements the body
  /// received); compares equal to end() at the end of the epoch and while the loader is paused.
  /// The loader must outlive it.
  using iterator = detail::LazyIterator<T, Reader>;

  /// A loader over `pipe` (copied), without a reading service.
  explicit DataLoader2(const IterPipe<T>& pipe) : core_(make_core(pipe, {}, nullptr)) {}
  /// A loader over `pipe` (copied), rewritten by `adapters`, without a reading service.
  DataLoader2(const IterPipe<T>& pipe, const std::vector<AdapterPtr>& adapters)
      : core_(make_core_adapted(pipe, adapters, nullptr)) {}
  /// A loader over `pipe` run by a copy of `service`.
  template <std::derived_from<ReadingServiceInterface> Service>
  DataLoader2(const IterPipe<T>& pipe, const Service& service) : core_(make_core<Service>(pipe, {}, &service)) {}
  template <std::derived_from<ReadingServiceInterface> Service>
  DataLoader2(const IterPipe<T>& pipe, const std::vector<AdapterPtr>& adapters, const Service& service)
      : core_(make_core_adapted<Service>(pipe, adapters, &service)) {}
  /// A map pipe is read in key order (torchdata converts it with to_iter_datapipe).
  template <class K>
  explicit DataLoader2(const MapPipe<K, T>& pipe, const std::vector<AdapterPtr>& adapters = {})
      : DataLoader2(pipe.to_iter(), adapters) {}
  template <class K, std::derived_from<ReadingServiceInterface> Service>
  DataLoader2(const MapPipe<K, T>& pipe, const Service& service) : DataLoader2(pipe.to_iter(), service) {}

  DataLoader2(DataLoader2&&) noexcept = default;
  DataLoader2& operator=(DataLoader2&&) noexcept = default;
  /// Shuts the loader down.
  ~DataLoader2() = default;

  /// Thread-safety: a loader is used by one thread at a time; a call (or an iterator's read) while
  /// another thread is inside the loader throws UsageError instead of racing.

  /// Starts (or, if no element was taken since the last one, joins) an epoch.
  [[nodiscard]] iterator begin();
  [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }

  /// The seed of the next epoch (later epochs continue its generator).
  void seed(std::uint64_t seed) {
    const detail::LoaderUse use(*core_, "seed");
    core_->seed(seed);
  }
  /// Finalizes the reading service and stops background work. Idempotent; iterating afterwards
  /// throws UsageError.
  void shutdown() {
    const detail::LoaderUse use(*core_, "shutdown");
    core_->shutdown();
  }
  /// Stops after the element just taken: the current iterator compares equal to end() until
  /// resume(). Nothing is lost or repeated.
  void pause() {
    const detail::LoaderUse use(*core_, "pause");
    core_->pause();
  }
  void resume() {
    const detail::LoaderUse use(*core_, "resume");
    core_->resume();
  }
  /// Pauses after `num_batches` more elements (std::nullopt: no limit); resume() continues.
  void limit(std::optional<std::size_t> num_batches) {
    const detail::LoaderUse use(*core_, "limit");
    core_->limit(num_batches);
  }

  /// The loader's state as a versioned byte blob: the elements the loop body has received, the
  /// randomness, and every node's position. Restore it with load_state_dict().
  [[nodiscard]] std::vector<std::byte> state_dict() {
    const detail::LoaderUse use(*core_, "state_dict");
    return core_->state_dict();
  }
  /// Restores a state_dict() into this loader, built by the same pipeline code (the same stateful
  /// nodes, the same settings of every node, the same fingerprint) and not yet iterated; the next
  /// iteration continues exactly where the saved one stopped. Everything the blob holds is checked
  /// here, the worker processes' parts included (they are started and restored before this
  /// returns): a blob that does not fit throws StateError and leaves the loader as it was.
  void load_state_dict(std::span<const std::byte> blob, const RestoreOptions& options = {}) {
    const detail::LoaderUse use(*core_, "load_state_dict");
    core_->load_state_dict(blob, options);
  }
  /// A text of the user's own for what dpipe cannot see of the pipeline (what a map's function
  /// does: "augment v2"), saved in every checkpoint; load_state_dict() refuses a checkpoint saved
  /// with another one. Set it before load_state_dict(). Empty by default.
  void set_fingerprint(std::string fingerprint) {
    const detail::LoaderUse use(*core_, "set_fingerprint");
    core_->set_fingerprint(std::move(fingerprint));
  }

  /// The graph as the adapters left it, before the reading service rewrote it.
  [[nodiscard]] graph::DataPipeGraph graph_before_reading_service() const {
    const detail::LoaderUse use(*core_, "graph_before_reading_service");
    return graph::traverse_dps(core_->graph_before_reading_service());
  }
  /// The graph being run (after the reading service's initialize, once iterated).
  [[nodiscard]] graph::DataPipeGraph graph() const {
    const detail::LoaderUse use(*core_, "graph");
    return graph::traverse_dps(core_->root());
  }
  /// The loader's copy of the reading service, or nullptr.
  [[nodiscard]] ReadingServiceInterface* reading_service() const noexcept { return core_->reading_service(); }
  /// Epochs started so far, and elements handed out in the current one. After load_state_dict(),
  /// before the next iteration, they are the restored ones: the epoch the checkpoint was saved in
  /// (which the next iteration continues, or follows when it had ended) and its elements.
  [[nodiscard]] std::uint64_t epoch() const {
    const detail::LoaderUse use(*core_, "epoch");
    return core_->epoch();
  }
  [[nodiscard]] std::uint64_t elements_in_epoch() const {
    const detail::LoaderUse use(*core_, "elements_in_epoch");
    return core_->elements_in_epoch();
  }

  /// How many elements an epoch yields with this loader's reading service and worker count, when
  /// the pipeline's lengths tell (the source's length is known and nothing in between filters);
  /// std::nullopt otherwise. Worked out on a copy of the pipeline: nothing starts. With worker
  /// processes, each worker batches its own shard, so a batch() in the workers' branch yields a
  /// short last batch per worker (docs/dataloader.md).
  [[nodiscard]] std::optional<std::size_t> epoch_length() const {
    const detail::LoaderUse use(*core_, "epoch_length");
    return core_->epoch_length();
  }
  /// Reports progress every `options.interval` while the loader runs (elements/s, the position in
  /// the epoch, the nodes of this process that take the time), and once at the end of each
  /// epoch; std::nullopt stops. Off by default; when off it costs nothing per element.
  void report_progress(std::optional<ProgressOptions> options = ProgressOptions{}) {
    const detail::LoaderUse use(*core_, "report_progress");
    core_->report_progress(std::move(options));
  }

 private:
  /// Registers the typed operations a reading service of type Service may apply to the root for T
  /// (ops::AppendPrefetch and ops::AppendFullSync: any service but MultiProcessingReadingService,
  /// which appends neither; InProcessReadingService appends no fullsync), then builds the protocol.
  template <class Service = void>
  static std::unique_ptr<detail::LoaderCore> make_core(const IterPipe<T>& pipe, const std::vector<AdapterPtr>& adapters,
                                                       const ReadingServiceInterface* service) {
    if constexpr (!std::is_void_v<Service> && !std::is_same_v<Service, MultiProcessingReadingService>) {
      register_typed_op_once<ops::AppendPrefetch, T, &append_node<iter::Prefetcher, T, std::size_t>>();
      if constexpr (!std::is_same_v<Service, InProcessReadingService>) {
        register_typed_op_once<ops::AppendFullSync, T,
                               &append_node<iter::FullSync, T, std::chrono::milliseconds>>();
      }
    }
    return std::make_unique<detail::LoaderCore>(pipe.ptr(), adapters, service);
  }
  /// make_core for a loader with adapters, which may append a shuffle (ops::AppendShuffle).
  template <class Service = void>
  static std::unique_ptr<detail::LoaderCore> make_core_adapted(const IterPipe<T>& pipe,
                                                               const std::vector<AdapterPtr>& adapters,
                                                               const ReadingServiceInterface* service) {
    register_typed_op_once<ops::AppendShuffle, T, &append_node<iter::Shuffler, T, std::size_t>>();
    return make_core<Service>(pipe, adapters, service);
  }

  /// The typed root, checked once per change of the graph.
  IterDataPipe<T>& root() {
    if (root_version_ != core_->root_version() || root_ == nullptr) {
      root_ = dynamic_cast<IterDataPipe<T>*>(core_->root().get());
      if (root_ == nullptr) detail::throw_loader_type_mismatch(*core_->root(), type_name<T>());
      root_version_ = core_->root_version();
    }
    return *root_;
  }

  std::optional<T> next(std::uint64_t id) {
    const detail::LoaderUse use(*core_, "iterator increment");
    if (!core_->before_next(id)) return std::nullopt;
    std::optional<T> element;
    try {
      element = root().next();
    } catch (...) {
      core_->fail();
      throw;
    }
    core_->after_next(element.has_value());
    return element;
  }

  /// How the iterator reads: through the loader, with the iterator's id.
  struct Reader {
    DataLoader2* loader;
    std::uint64_t id;
    std::optional<T> read() { return loader->next(id); }
    [[nodiscard]] bool end_is_final() const noexcept { return !loader->core_->paused(); }
  };

  std::unique_ptr<detail::LoaderCore> core_;
  IterDataPipe<T>* root_ = nullptr;
  std::uint64_t root_version_ = 0;
};

template <class T>
typename DataLoader2<T>::iterator DataLoader2<T>::begin() {
  const detail::LoaderUse use(*core_, "begin");
  const std::uint64_t id = core_->start_iterator();
  for (std::uint64_t skip = core_->take_replay(); skip > 0; --skip) {
    try {
      if (!root().next()) break;
    } catch (...) {
      core_->fail();
      throw;
    }
  }
  return iterator(Reader{this, id});
}

}  // namespace dpipe

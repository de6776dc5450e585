#pragma once
/// \file
/// The reading-service interfaces (torchdata's ReadingServiceInterface and
/// CheckpointableReadingServiceInterface). A reading service decides how DataLoader2 runs a
/// graph: it may rewrite the graph once (initialize), prepare every epoch (initialize_iteration),
/// and clean up. DataLoader2 owns a copy of the service it is given (clone()), the C++ form of
/// torchdata's rule that a reading service must be picklable before initialize.
///
/// Write your own by deriving from ReadingService<YourService> (which implements clone()) and
/// overriding initialize(); see examples/custom_reading_service.cpp.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/random/seed_generator.hpp>
#include <dpipe/tensor/host_allocator.hpp>

namespace dpipe {

/// A function that rewrites a graph and returns its new root (torchdata's iter_reset_fn,
/// pause_fn, ...). Empty means "nothing to do".
using GraphFunction = std::function<DataPipePtr(DataPipePtr)>;
/// How many elements one epoch of a graph yields, std::nullopt when that is not known (see
/// ReadingServiceInterface::epoch_length_before).
using EpochLengthFunction = std::function<std::optional<std::size_t>(const DataPipePtr&)>;

/// Which of several workers a copy of a graph runs in (torchdata's WorkerInfo).
struct WorkerInfo {
  std::size_t num_workers = 1;
  std::size_t worker_id = 0;
  friend bool operator==(const WorkerInfo&, const WorkerInfo&) = default;
};

/// Called once with the graph a worker runs (in process: the whole graph, as worker 0 of 1; in a
/// worker process: its copy of the replicable branch, sharding applied); returns the graph to run.
using WorkerInitFunction = std::function<DataPipePtr(DataPipePtr, const WorkerInfo&)>;
/// Called every epoch where the graph runs, after it was seeded; returns the graph to run.
using WorkerResetFunction = std::function<DataPipePtr(DataPipePtr, const WorkerInfo&, SeedGenerator&)>;

/// Which typed operations of <dpipe/core/root_ops.hpp> a reading service may apply to a loader's
/// root. DataLoader2<T> reads it from the service's type (`Service::kRootOps`) and registers those
/// operations for T, so that a loader compiles a prefetch or a fullsync node for its element type
/// only when its service may append one. A service declares its own by defining `kRootOps`; the
/// interface's default, which services of your own inherit, allows both.
struct RootOps {
  bool prefetch = true;  ///< ops::AppendPrefetch
  bool fullsync = true;  ///< ops::AppendFullSync
};

/// Thread-safety: a reading service is used by the thread that uses its DataLoader2.
class ReadingServiceInterface {
 public:
  /// What this kind of service may append to a loader's root (see RootOps).
  static constexpr RootOps kRootOps{};

  virtual ~ReadingServiceInterface() = default;

  /// A copy of this service in its configured (not yet initialized) state.
  [[nodiscard]] virtual std::unique_ptr<ReadingServiceInterface> clone() const = 0;

  /// What the service is, for messages and checkpoints: "dpipe::MultiProcessingReadingService
  /// with 2 worker processes". The default is the service's type name.
  [[nodiscard]] virtual std::string describe() const;

  /// Called once, at the first iteration: may rewrite the graph; returns its root.
  virtual DataPipePtr initialize(DataPipePtr graph) = 0;
  /// How many elements one epoch of `graph` (the loader's pipeline, before initialize()) yields
  /// under this service, worked out without starting anything; std::nullopt when that is not
  /// known. The default is std::nullopt: a service may shard or reshape the graph, so only it
  /// can tell.
  [[nodiscard]] virtual std::optional<std::size_t> epoch_length(const DataPipePtr& graph) const;
  /// epoch_length() of this service followed by others (SequentialReadingService): `rest` tells
  /// how many elements a graph that this service made yields under the services after it. A
  /// service that shards the graph (DistributedReadingService) shards a copy per rank and asks
  /// `rest`. The default is std::nullopt: only the service knows what it hands on.
  [[nodiscard]] virtual std::optional<std::size_t> epoch_length_before(const DataPipePtr& graph,
                                                                       const EpochLengthFunction& rest) const;
  /// Called at the start of every epoch, after the loader (re)seeded `seeds`; may return a
  /// function the loader applies to the graph. `iter_reset_fn` comes from a service before this
  /// one (SequentialReadingService).
  virtual GraphFunction initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn = {});
  /// Called at the end of an epoch (and on a stale iterator, and at shutdown).
  virtual void finalize_iteration() {}
  /// Called once, at shutdown.
  virtual void finalize() {}

  // Optional hooks (torchdata's _pause, _resume and _limit). A service that supports them says so.

  /// The allocator of the tensors made or received in the loader's thread while it reads (the
  /// thread's current_host_allocator(), see <dpipe/tensor/host_allocator.hpp>); null: the
  /// thread's own. Valid after initialize() or restore().
  [[nodiscard]] virtual HostAllocatorPtr host_allocator() const { return nullptr; }

  [[nodiscard]] virtual bool supports_pause() const { return false; }
  /// Pauses: no more elements are handed out and the graph's background threads stop
  /// (graph::BackgroundStop); elements read ahead are kept. REQUIRES: supports_pause().
  virtual GraphFunction pause(GraphFunction pause_fn = {});
  /// Restarts what pause() stopped. REQUIRES: supports_pause().
  virtual GraphFunction resume(GraphFunction resume_fn = {});
  [[nodiscard]] virtual bool supports_limit() const { return false; }
  /// Hears that the loader will pause after `num_batches` more elements (std::nullopt: no limit).
  /// REQUIRES: supports_limit().
  virtual GraphFunction limit(std::optional<std::size_t> num_batches, GraphFunction limit_fn = {});

 protected:
  ReadingServiceInterface() = default;
  ReadingServiceInterface(const ReadingServiceInterface&) = default;
  ReadingServiceInterface& operator=(const ReadingServiceInterface&) = default;
};

/// A reading service that can save and restore its state (the graph's own state is saved by the
/// loader; this is what lives outside the loader's process, such as worker graphs). Its fields go
/// into the loader's checkpoint under the scope "service" (see <dpipe/core/state.hpp>).
class CheckpointableReadingServiceInterface : public ReadingServiceInterface {
 public:
  /// Writes the service's state, for DataLoader2::state_dict(), which then saves the graph's state
  /// and calls resume_after_checkpoint(). A service may keep its graph still in between (the
  /// multiprocessing service pauses its workers so that the main process's nodes hold exactly
  /// what they have received).
  virtual void checkpoint(StateWriter& writer) = 0;
  /// Restarts what checkpoint() stopped, unless the loader is paused. Called even when saving the
  /// graph's state failed.
  virtual void resume_after_checkpoint() {}
  /// Replaces initialize() when the loader restores a checkpoint: rewrites the graph as
  /// initialize() would and restores what checkpoint() wrote; returns the root. Every field under
  /// the reader's scope must be read (StateReader counts them).
  virtual DataPipePtr restore(DataPipePtr graph, const StateReader& reader) = 0;
};

/// Implements clone() for a service: `class MyService : public ReadingService<MyService>`, or
/// `ReadingService<MyService, CheckpointableReadingServiceInterface>`.
template <class Derived, class Base = ReadingServiceInterface>
class ReadingService : public Base {
 public:
  [[nodiscard]] std::unique_ptr<ReadingServiceInterface> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
};

}  // namespace dpipe

#pragma once
/// \file
/// The part of DataLoader2 that does not depend on the element type: torchdata's epoch protocol,
/// seeding, pause / resume / limit, shutdown and the loader's checkpoints. DataLoader2<T>
/// (<dpipe/loader/dataloader2.hpp>) is a typed layer over it. RestoreOptions is public; the rest is internal.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <dpipe/adapter.hpp>
#include <dpipe/core/datapipe.hpp>
#include <dpipe/loader/progress.hpp>
#include <dpipe/random/seed_generator.hpp>
#include <dpipe/reading_service/reading_service.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe {
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

  // --- the iterator's protocol -------------------------------------------------------------------

  /// torchdata's __iter__: starts a new epoch when needed and returns the new iterator's id.
  std::uint64_t start_iterator();
  /// Counts the iterations of the graph the loader started (epochs, restored epochs continued):
  /// the typed layer drops what it read ahead when it changes.
  [[nodiscard]] std::uint64_t iteration() const noexcept { return iteration_; }
  /// Elements the typed layer must read and drop before handing any out (replaying a restored
  /// epoch for nodes without state support); resets to 0.
  std::uint64_t take_replay();
  /// Before handing out elements through iterator `id`: how many it may hand out before it asks
  /// again (0 while paused; the rest of a limit). Throws UsageError for a stale iterator and after
  /// shutdown.
  std::uint64_t grant(std::uint64_t id);
  /// The iterator handed out `count` more elements: counts them, reports progress, and pauses
  /// when a limit is reached.
  void handed_out(std::uint64_t count);
  /// The iterator reached the end of the epoch's stream (again, after the first time: nothing); an
  /// epoch that handed out no element is logged as a warning, once.
  void reached_end();
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

  // --- DataLoader2's operations --------------------------------------------------------------------

  void seed(std::uint64_t seed);
  void shutdown() noexcept;
  void pause();
  void resume();
  void limit(std::optional<std::size_t> num_batches);
  /// The loader's checkpoint. `write_read_ahead`, when set, encodes the elements the iterator read
  /// from the pipeline and has not handed out yet; `failed_ahead` says that reading them ended in
  /// an exception the trainer has not seen yet (the checkpoint then replays the epoch).
  [[nodiscard]] std::vector<std::byte> state_dict(const std::function<void(ByteWriter&)>& write_read_ahead,
                                                  bool failed_ahead);
  /// Restores a state_dict(). `adopt_read_ahead` decodes the elements read ahead that the blob
  /// holds, if any, before anything changes; a SerializationError from it is a StateError.
  void load_state_dict(std::span<const std::byte> blob, const RestoreOptions& options,
                       const std::function<void(ByteReader&)>& adopt_read_ahead);
  /// Writes the job's checkpoint to `path` (on rank 0): `state`, this rank's state_dict(), and
  /// every other rank's, gathered by the loader's DistributedReadingService (a job of one without).
  void save_job_checkpoint(const std::filesystem::path& path, std::span<const std::byte> state);
  /// Restores this rank's part of the job's checkpoint at `path`, which rank 0 reads and hands on,
  /// as load_state_dict() does.
  void load_job_checkpoint(const std::filesystem::path& path, const RestoreOptions& options,
                           const std::function<void(ByteReader&)>& adopt_read_ahead);
  void set_fingerprint(std::string fingerprint) { fingerprint_ = std::move(fingerprint); }
  [[nodiscard]] std::optional<std::size_t> epoch_length() const;
  void report_progress(std::optional<ProgressOptions> options);

  [[nodiscard]] const DataPipePtr& graph_before_reading_service() const noexcept { return before_service_; }
  [[nodiscard]] ReadingServiceInterface* reading_service() const noexcept { return service_.get(); }
  /// The reading service's host_allocator(), for the thread reading the graph; null without one.
  [[nodiscard]] HostAllocatorPtr host_allocator() const { return service_ ? service_->host_allocator() : nullptr; }
  [[nodiscard]] bool paused() const noexcept { return paused_; }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return position_.epoch; }
  [[nodiscard]] std::uint64_t elements_in_epoch() const noexcept { return position_.taken; }

 private:
  struct Restore;

  /// The loader's randomness: the generator of the epochs' seeds and the seed the user set.
  struct Seeds {
    SeedGenerator generator;
    SeedGenerator epoch_start;          // the generator as the current epoch started
    std::optional<std::uint64_t> seed;  // seed(), if called
    bool reseed = true;                 // seed() was called since the last epoch started
    /// Advances to the next epoch's seeds.
    void start_epoch();
  };
  /// Where the loader stands in its epochs.
  struct Position {
    std::uint64_t epoch = 0;  // epochs started
    std::uint64_t taken = 0;  // elements handed out in the current one
    bool ended = false;       // the current one's stream ended
  };
  /// limit(): the elements until the loader pauses.
  struct Limit {
    std::optional<std::size_t> limit;
    std::size_t counted = 0;
  };

  /// Throws UsageError once an iterator was created (torchdata's message).
  void require_not_iterated() const;
  /// load_state_dict() with `service`, a fresh copy of the loader's reading service (or null).
  void restore(std::span<const std::byte> blob, const RestoreOptions& options,
               const std::function<void(ByteReader&)>& adopt_read_ahead,
               std::unique_ptr<ReadingServiceInterface> service);
  void set_graph(DataPipePtr graph);
  /// Runs the reading service's initialize() (or restore(), for a checkpoint) once.
  void adapt_once();
  /// `graph` as `service` rewrites it: initialized, or restored from `restore`.
  [[nodiscard]] static DataPipePtr adapt(ReadingServiceInterface* service, DataPipePtr graph, const Restore* restore);
  /// Seeds the graph for epoch `epoch` (from 1), through the reading service when there is one;
  /// a global order starts at global step `start_step`.
  void seed_graph(std::uint64_t epoch, std::uint64_t start_step = 0);
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
  std::uint64_t iteration_ = 0;
  bool adapted_ = false;
  bool reset_iter_ = true;
  bool terminated_ = false;
  bool paused_ = false;
  bool failed_ = false;  // the pipeline threw (see fail())
  std::optional<std::uint64_t> valid_iterator_;
  Seeds seeds_;
  Position position_;
  Limit limit_;
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
}  // namespace dpipe

#pragma once
// RankGroup: one loader's place among the ranks of a distributed job: its store (under the
// loader's prefix), seed sharing, and the fullsync rounds of its graph.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/distributed/launch_environment.hpp>
#include <dpipe/distributed/store.hpp>
#include <dpipe/distributed/tcp_store.hpp>
#include <dpipe/reading_service/distributed.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::detail::dist {

/// What the ranks of a job must agree on to run together: the ranks compare it at their first
/// round, and a rank that differs is a RendezvousError on every rank, naming both sides.
struct RunIdentity {
  std::uint64_t epoch = 0;  // the epoch rounds done before (a checkpoint's)
  bool restored = false;    // from a checkpoint
  std::string pipeline;     // a fingerprint of the pipeline (its nodes, types and settings)
  std::string service;      // a fingerprint of the service's options
  DPIPE_FIELDS(epoch, restored, pipeline, service)
  friend bool operator==(const RunIdentity&, const RunIdentity&) = default;
};

/// Thread-safety: its functions may be called from several threads (the loader's, a prefetch
/// thread reading fullsync); they take turns on the store.
class RankGroup : public std::enable_shared_from_this<RankGroup> {
 public:
  /// The place of this rank among those of `environment`, its keys under `prefix`, meeting the
  /// others through `options.store` or a TcpStore that rank 0 serves. A world of one meets nobody
  /// and opens no socket. The TcpStore starts at the first call that needs it, not here: a
  /// service after this one (worker processes) forks first, so that no child is forked while
  /// the store's thread runs. `identity`: what this rank runs, compared at the first round.
  RankGroup(LaunchEnvironment environment, const DistributedOptions& options, std::string prefix, RunIdentity identity);
  /// Leaves the job.
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  [[nodiscard]] const LaunchEnvironment& environment() const noexcept { return environment_; }
  /// "rank 1 of 2 under torchrun, rank 0 serving the store at 10.0.0.1:29501": for messages.
  [[nodiscard]] const std::string& where() const noexcept { return where_; }

  /// Rank 0's `own` value of epoch round `epoch` (every rank calls it with its own).
  std::uint64_t share_seed(std::uint64_t own, std::uint64_t epoch);
  /// This rank runs from a checkpoint, after `epochs` epoch rounds (before the first round).
  void restored(std::uint64_t epochs);
  /// Throws RendezvousError when the store told that another rank is gone; never waits.
  void check_departures() const;
  /// The agreement of the `index`-th fullsync node of the graph; null for a world of one.
  [[nodiscard]] std::shared_ptr<RankSync> fullsync(std::size_t index);
  /// Tells the other ranks this rank leaves on purpose, and closes the store. Never throws.
  void leave() noexcept;

  /// Store::exchange of this rank, waiting at most `timeout`; RendezvousError (with `what` and
  /// this rank's place) for any failure of the store. The first one first meets the other ranks
  /// and compares what they run: RendezvousError naming both sides of a disagreement.
  std::vector<std::vector<std::byte>> exchange(const std::string& post, std::span<const std::byte> value,
                                               const std::string& collect, std::chrono::milliseconds timeout,
                                               const std::string& what);
  /// Leaves `value` in `round` without waiting. Never throws.
  void post(const std::string& round, std::span<const std::byte> value) noexcept;
  /// Store::set and Store::get-then-remove of this rank, waiting at most the loader's timeout;
  /// RendezvousError (with `what`) for any failure of the store. For values too large to hand
  /// to every rank (a rank's checkpoint), where exchange() gives every rank every value.
  void put(const std::string& key, std::span<const std::byte> value, const std::string& what);
  [[nodiscard]] std::vector<std::byte> take(const std::string& key, const std::string& what);

 private:
  LaunchEnvironment environment_;
  std::string where_;
  std::chrono::milliseconds timeout_;
  std::size_t fullsync_block_;
  /// Starts dpipe's TcpStore, unless the trainer brought a store, or it runs, or the rank left;
  /// waits for the store `patience` at most (default: the loader's timeout).
  void connect(std::optional<std::chrono::milliseconds> patience = std::nullopt);
  /// Compares this rank's identity with every rank's, at the first call on the store (under the
  /// mutex, connected).
  void meet();
  /// Runs `call` on the store with `timeout`, one call at a time, connected, after meeting the
  /// other ranks; RendezvousError naming `what` for its failures.
  template <class Call>
  auto on_store(const std::string& what, std::chrono::milliseconds timeout, Call call);
  /// on_store() with the mutex held and the store connected.
  template <class Call>
  auto on_store_locked(const std::string& what, std::chrono::milliseconds timeout, Call call);

  RunIdentity identity_;
  bool met_ = false;
  std::atomic<bool> departed_{false};  // the store told that another rank is gone...
  mutable std::mutex departure_mutex_;
  std::string departure_;  // ...and why

  TcpStoreOptions tcp_options_;    // dpipe's own store, when the trainer brought none...
  std::shared_ptr<TcpStore> tcp_;  // ...once it started
  bool left_ = false;
  std::unique_ptr<Store> store_;  // the loader's view of the store, keys under its prefix
  std::mutex mutex_;              // one call on the store at a time
};

}  // namespace dpipe::detail::dist

#pragma once
/// \file
/// DistributedReadingService (torchdata's, without torch.distributed or MPI): runs the loader of
/// one rank of a distributed job. Every rank builds the same pipeline and loader; the service
///
/// - finds its rank and world size in the options or in the launcher's environment (torchrun,
///   Slurm, Open MPI, PMI: see <dpipe/distributed/launch_environment.hpp>) and meets the other
///   ranks through a rendezvous store: a TcpStore that rank 0 serves from a background thread, or
///   the trainer's own Store;
/// - at initialize(), applies DISTRIBUTED sharding (rank r of W) and appends `fullsync` unless the
///   root is one, so every rank stops an epoch after the same number of elements, the least any
///   rank has;
/// - each epoch, shares rank 0's seed (SeedGenerator::generate_shared_seed on rank 0, through the
///   store), reseeds the loader's generator with it, spawns it by rank and seeds the graph: random
///   nodes before the sharding point draw the same seeds on every rank, the others a seed per rank.
///   For the same seed the order is torchdata's, bit for bit.
///
/// Compose it with worker processes or threads as torchdata does, distributed first:
/// `SequentialReadingService(DistributedReadingService(), MultiProcessingReadingService({.num_workers = 2}))`:
/// the workers then hold instance `worker + num_workers * rank` of `num_workers * W`, and fullsync
/// runs in the main process on top of the merged workers.
///
/// A world of one opens no socket. A failure on one rank (an exception in its pipeline, its
/// process dying, its loader shutting down, a rank that never arrives) makes every other rank's
/// loader raise RendezvousError naming that rank and why, within `timeout`; a rank whose process
/// dies is named at the next element the others hand out, whatever the fullsync block. At their
/// first round the ranks compare what they run (the epoch, restored or fresh, fingerprints of the
/// pipeline and of these options): a disagreement is a RendezvousError on every rank at once,
/// naming both sides. While a rank waits for the others, a warning naming the ranks not yet
/// arrived is logged every `stall_warning`. Checkpoints record
/// the rank and the world size; a checkpoint restores only on the same rank of the same world
/// size (StateError naming both otherwise).
///
/// Thread-safety: one thread uses the service (through its DataLoader2).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <dpipe/distributed/launch_environment.hpp>
#include <dpipe/reading_service/reading_service.hpp>

namespace dpipe {

class Store;

namespace detail::dist {
class RankGroup;
}  // namespace detail::dist

struct DistributedOptions {
  /// The longest a rank waits for the others: connecting to the store, sharing a seed, a fullsync
  /// round (torchdata's default: 30 minutes).
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  /// The rank, the world size, the store's host, port and job token; what is unset comes from the
  /// launcher's environment (detect_launch_environment).
  RendezvousOptions rendezvous{};
  /// A store the trainer already has (its framework's): the loader's keys go into it, under its
  /// prefix, and no TcpStore is started. The loader calls it from its own thread (and from a
  /// prefetch thread reading fullsync); loaders of several threads need a thread-safe store, or
  /// one each (a TcpStore is one connection, used by one thread at a time). Empty: rank 0 serves
  /// a TcpStore (one server per process and port, shared by the process's loaders) and every
  /// loader of every rank connects to it.
  std::shared_ptr<Store> store{};
  /// The name of this loader's keys in the store: they go under "<name>/<k>/", k counting the
  /// loaders of that name this process started, so that the ranks' k-th loaders of a name meet.
  /// Empty: "loader". Name loaders that not every rank creates, or not in the same order.
  std::string name{};
  /// The most elements fullsync reads ahead for one round of agreement with the other ranks:
  /// rounds start at 1 element per epoch and double up to this, so the store sees about one
  /// request per rank per `fullsync_block` elements, and a rank holds at most two blocks (it
  /// agrees a round ahead). Lower it for large elements (batches of images).
  std::size_t fullsync_block = 1024;
  /// While a rank waits for the others (for rank 0's store to come up, in a seed or fullsync
  /// round), a warning naming the ranks not yet arrived is logged every `stall_warning`; zero:
  /// never. (dpipe's TcpStore only: a trainer's own store waits silently.)
  std::chrono::milliseconds stall_warning{30000};
};

class DistributedReadingService final
    : public ReadingService<DistributedReadingService, CheckpointableReadingServiceInterface> {
 public:
  /// It appends a fullsync (the ranks stop each epoch together), never a prefetch.
  static constexpr RootOps kRootOps{.prefetch = false, .fullsync = true};

  explicit DistributedReadingService(DistributedOptions options = {});
  /// Copies the options; the copy has not met the other ranks.
  DistributedReadingService(const DistributedReadingService& other);
  DistributedReadingService& operator=(const DistributedReadingService&) = delete;
  /// Leaves the job (finalize()).
  ~DistributedReadingService() override;

  [[nodiscard]] const DistributedOptions& options() const noexcept { return options_; }

  /// Meets the other ranks, shards the graph for this rank and appends fullsync. Throws
  /// RendezvousError when the environment is incomplete or the other ranks cannot be met in time.
  DataPipePtr initialize(DataPipePtr graph) override;
  /// What every rank yields in an epoch: the least of the ranks' sharded lengths, when known.
  [[nodiscard]] std::optional<std::size_t> epoch_length(const DataPipePtr& graph) const override;
  /// The least over the ranks of what `rest` says of each rank's sharded copy of `graph` (the
  /// services after this one run each rank's shard; fullsync ends every rank at the least).
  [[nodiscard]] std::optional<std::size_t> epoch_length_before(const DataPipePtr& graph,
                                                               const EpochLengthFunction& rest) const override;
  /// Shares rank 0's seed, reseeds `seeds` with it, spawns it by rank and seeds the graph.
  GraphFunction initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn = {}) override;
  /// Tells the other ranks this one leaves, and closes the store (rank 0: serves no more).
  void finalize() override;

  /// Pausing and limits need nothing from the other ranks: a paused rank's fullsync keeps what it
  /// read ahead (the others wait for it in their next round, up to `timeout`).
  [[nodiscard]] bool supports_pause() const override { return true; }
  GraphFunction pause(GraphFunction pause_fn = {}) override { return pause_fn; }
  GraphFunction resume(GraphFunction resume_fn = {}) override { return resume_fn; }
  [[nodiscard]] bool supports_limit() const override { return true; }
  GraphFunction limit(std::optional<std::size_t> /*num_batches*/, GraphFunction limit_fn = {}) override {
    return limit_fn;
  }

  /// Writes the rank, the world size and the epochs whose seeds were shared.
  void checkpoint(StateWriter& writer) override;
  /// Refuses a checkpoint of another rank or world size (StateError naming both), then does what
  /// initialize() does.
  DataPipePtr restore(DataPipePtr graph, const StateReader& reader) override;

  /// This process's place in the job (after initialize()).
  [[nodiscard]] const LaunchEnvironment& environment() const;

  /// Every rank's state, in rank order.
  using RankStates = std::vector<std::vector<std::byte>>;
  /// A collective of the ranks (each calls it at the same step, DataLoader2::save_job_checkpoint):
  /// rank 0 receives every rank's `state` through the store and calls `write` with them; every
  /// rank returns once `write` returned. What `write` throws, rank 0 throws and every other rank
  /// raises as a StateError naming rank 0. A world of one calls `write` with `state` alone.
  /// `graph` is the pipeline the loader hands its service, for a service not yet initialized.
  void gather_states(const DataPipePtr& graph, std::span<const std::byte> state,
                     const std::function<void(const RankStates&)>& write);
  /// A collective of the ranks (DataLoader2::load_job_checkpoint): rank 0 calls `read` with the
  /// world size, which returns every rank's state, and each rank returns its own through the store.
  /// What `read` throws, rank 0 throws and every other rank raises as a StateError naming rank 0.
  /// `graph` is the pipeline the loader hands its service; the ranks meet as restored ones.
  [[nodiscard]] std::vector<std::byte> scatter_states(const DataPipePtr& graph,
                                                      const std::function<RankStates(std::size_t world_size)>& read);

 private:
  /// The environment from the options and the launcher (a trainer's own store needs no host).
  [[nodiscard]] LaunchEnvironment detect() const;
  /// This loader's place among the ranks, made at the first call that needs it (initialize() or a
  /// job checkpoint's collective) with the fingerprint of `graph` (what the loader hands the
  /// service, before sharding) that the ranks compare; it connects to the store at its first round.
  detail::dist::RankGroup& meet(const DataPipePtr& graph);

  DistributedOptions options_;
  std::shared_ptr<detail::dist::RankGroup> group_;
  DataPipePtr root_;
  std::uint64_t epochs_ = 0;   // epochs whose seed was shared (names the next one's round)
  std::uint64_t gathers_ = 0;  // gather_states() calls (names the next one's rounds)
};

/// The DistributedReadingService of a loader's reading service: `service` itself, or one of a
/// SequentialReadingService's; nullptr when there is none.
[[nodiscard]] DistributedReadingService* find_distributed_service(ReadingServiceInterface* service);

}  // namespace dpipe

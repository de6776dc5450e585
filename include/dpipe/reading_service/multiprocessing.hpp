#pragma once
/// \file
/// MultiProcessingReadingService (torchdata's): runs the pipeline in forked worker processes that
/// hand their elements to the main process through shared memory, or, with
/// `worker_kind = WorkerKind::kThread`, in worker threads that hand them over without encoding.
///
/// At initialize() it splits the graph as torchdata does. A `sharding_round_robin_dispatch` branch
/// (up to the lowest common ancestor of the dispatch nodes) runs once, in a dispatching process
/// that deals element j to worker j mod N. The replicable branch runs in each of `num_workers`
/// workers with MULTIPROCESSING sharding applied (worker w of N). Non-replicable nodes (fullsync,
/// nodes with is_replicable() == false) and everything after them stay in the main process, on
/// top of the merged stream. The main process reads the workers strictly in turn, worker 0, 1, ...,
/// skipping a worker whose shard ended, so shards of any sizes merge without loss, and balanced
/// shards of a `sharding_filter` come out in the original order.
///
/// Workers persist across epochs. Each epoch, worker w gets the loader's seeds spawned for w
/// (SeedGenerator::spawn); with the same seed, the output is the same every run, and for a
/// pipeline whose random nodes sit before the sharding point it equals the in-process output for
/// the same seed, every epoch. After a DistributedReadingService (which reseeds every epoch from
/// rank 0's seed) it seeds exactly as torchdata does, in every epoch. Elements cross as bytes (dpipe::Serializer): an
/// element type without a Serializer is an InvalidArgument at initialize().
///
/// Failures: an exception in a worker reaches the loop as WorkerError ("Caught std::runtime_error
/// in worker process 1.\nOriginal message: ..."), after every element the workers produced before
/// it in merge order; a worker that dies raises WorkerError naming its pid and signal within a
/// second; a stall longer than `timeout` raises TimeoutError. Shutdown stops the workers (killing
/// them after two seconds) and leaves no process, shared memory or file descriptor behind.
///
/// Forking copies the calling process with only the forking thread: call initialize (the first
/// iteration of the loader) before starting threads that hold locks the workers' code needs, and
/// from a thread that outlives the loader (the workers get SIGKILL when that thread ends). See
/// docs/reading-services.md.
///
/// Worker threads (WorkerKind::kThread) run the same split, sharding, seeding, merge order, control
/// protocol and checkpoints; only the transport differs. An element moves from its worker to the
/// consumer (a heap box per element, no copy, no Serializer needed), so move-only elements work;
/// a worker's exception reaches the loop as itself, not as WorkerError; a checkpoint is
/// interchangeable with one of worker processes with the same num_workers (its elements in flight
/// are encoded then, which needs a Serializer). A thread cannot be killed: one stuck in a user
/// function past the shutdown's two seconds (at once after a timeout) is left running detached. worker_random(),
/// worker_seed() and current_worker() are per thread. See docs/reading-services.md, "Threads or
/// processes".
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
#include <sys/types.h>
#include <vector>

#include <dpipe/reading_service/reading_service.hpp>
#include <dpipe/tensor/host_allocator.hpp>

namespace dpipe {

namespace detail::mp {
class ProcessGroup;
struct GroupState;
}  // namespace detail::mp
namespace graph {
class BackgroundStop;
}  // namespace graph

/// What MultiProcessingReadingService's workers are.
enum class WorkerKind {
  kProcess,  ///< forked processes: a crash stays in its worker; elements are encoded through shared memory
  kThread,   ///< threads of this process: nothing is forked, encoded or copied
};

struct MultiProcessingOptions {
  /// Workers; 0 runs the pipeline in the calling process (use InProcessReadingService).
  std::size_t num_workers = 0;
  /// Processes or threads; the same data comes out in the same order either way.
  WorkerKind worker_kind = WorkerKind::kProcess;
  /// Elements each worker may have ready ahead of the consumer.
  std::size_t worker_prefetch_cnt = 10;
  /// Further elements the main process may have waiting, spread over the workers. torchdata keeps
  /// them in a prefetch thread; dpipe leaves them in shared memory, where reading costs one copy.
  std::size_t main_prefetch_cnt = 10;
  /// Called once in each worker with its graph (sharding applied).
  WorkerInitFunction worker_init_fn{};
  /// Called every epoch in each worker, and in the dispatching process with worker_id 0.
  WorkerResetFunction worker_reset_fn{};
  /// Longest wait for the next element of a worker before TimeoutError; zero waits as long as the
  /// worker lives. Production jobs should set one (a deadlock in user code otherwise waits forever).
  std::chrono::milliseconds timeout{0};
  /// While the main process waits for a worker, a warning is logged every `stall_warning` with the
  /// worker's pid and what it is doing (running its pipeline, waiting for the dispatching process,
  /// stopped); zero: never.
  std::chrono::milliseconds stall_warning{30000};
  /// Bytes of each worker process's shared-memory queue (rounded up to a power of two). An element
  /// longer than half of it still crosses, in parts, at the cost of one more copy. Worker threads
  /// pass 8-byte handles and size their queues from the prefetch counts.
  std::size_t queue_bytes = std::size_t{8} << 20;
  /// Tensors (dpipe::Tensor, tensor_collate's batches) reach the trainer in page-locked memory,
  /// ready for an asynchronous device copy: the CUDA runtime's, loaded at initialize()
  /// (cuda_host_allocator(); NotSupportedError there when it cannot pin). Worker threads collate
  /// straight into it; batches from worker processes are decoded into it, one copy. A buffer is
  /// reused once its last tensor goes: keep a tensor until an asynchronous copy from it finished.
  bool pin_memory = false;
  /// The allocator of those tensors instead (an arena, a counting allocator, your framework's);
  /// null: the heap (heap_allocator()). Not with pin_memory.
  HostAllocatorPtr host_allocator{};
  /// Bytes of each worker process's tensor arena: shared memory, mapped before the fork, in which
  /// the worker makes its tensors of 64 KiB and more (tensor_collate's batches, dpipe::Tensor
  /// elements). They reach the trainer with no copy at all: its tensors refer to the worker's
  /// memory, which the worker reuses once the last of them goes (they may outlive the loader).
  /// The tensors in flight and those the trainer keeps take room in it; without room, tensors are
  /// made on the heap and cross by copy. Pages are used as tensors need them. nullopt: four times
  /// queue_bytes; 0: no arena. Only with worker processes (worker threads need none), and not with
  /// pin_memory or host_allocator, whose memory the trainer's tensors must be in (setting it with
  /// either is an InvalidArgument).
  std::optional<std::size_t> tensor_arena_bytes{};
};

class MultiProcessingReadingService final
    : public ReadingService<MultiProcessingReadingService, CheckpointableReadingServiceInterface> {
 public:
  /// It appends nothing to the root: its prefetching is the workers' queues.
  static constexpr RootOps kRootOps{.prefetch = false, .fullsync = false};

  explicit MultiProcessingReadingService(MultiProcessingOptions options = {});
  /// Copies the options; the copy has no worker processes.
  MultiProcessingReadingService(const MultiProcessingReadingService& other);
  MultiProcessingReadingService& operator=(const MultiProcessingReadingService&) = delete;
  /// Stops the workers (finalize()).
  ~MultiProcessingReadingService() override;

  [[nodiscard]] const MultiProcessingOptions& options() const noexcept { return options_; }
  /// "dpipe::MultiProcessingReadingService with 2 worker processes" (the same words for threads,
  /// whose checkpoints are interchangeable with the processes' ones).
  [[nodiscard]] std::string describe() const override;

  DataPipePtr initialize(DataPipePtr graph) override;
  /// What the workers yield together (each runs its shard of the replicable branch: a batch at
  /// the end of the branch is short once per worker), passed through the nodes that stay in this
  /// process; unknown with worker_init_fn or worker_reset_fn, which may reshape the graph.
  [[nodiscard]] std::optional<std::size_t> epoch_length(const DataPipePtr& graph) const override;
  GraphFunction initialize_iteration(SeedGenerator& seeds, GraphFunction iter_reset_fn = {}) override;
  void finalize() override;

  /// pin_memory's allocator, or host_allocator.
  [[nodiscard]] HostAllocatorPtr host_allocator() const override { return allocator_; }

  [[nodiscard]] bool supports_pause() const override { return true; }
  GraphFunction pause(GraphFunction pause_fn = {}) override;
  GraphFunction resume(GraphFunction resume_fn = {}) override;
  [[nodiscard]] bool supports_limit() const override { return true; }
  GraphFunction limit(std::optional<std::size_t> num_batches, GraphFunction limit_fn = {}) override;

  /// Pauses the workers, collects their state and keeps everything paused until
  /// resume_after_checkpoint(), so that the loader can save the main process's nodes too.
  void checkpoint(StateWriter& writer) override;
  void resume_after_checkpoint() override;
  /// Splits the graph as initialize() does and starts workers that continue from `state`.
  DataPipePtr restore(DataPipePtr graph, const StateReader& reader) override;

  /// A Graphviz picture of the split graph: the main process's nodes, one worker's copy of the
  /// replicable branch and the dispatching process's branch, each in its own box. Empty before
  /// initialize().
  [[nodiscard]] std::string to_dot() const;
  /// The worker processes' ids (empty before initialize(), after finalize() and for threads).
  [[nodiscard]] std::vector<pid_t> worker_pids() const;
  /// The dispatching process's id, if one runs.
  [[nodiscard]] std::optional<pid_t> dispatcher_pid() const;

 private:
  DataPipePtr start(DataPipePtr graph, const detail::mp::GroupState* saved);
  /// Stops the threads of the main process's nodes (a prefetch after a fullsync) until
  /// restart_main_background(), so that nothing but the caller reads the workers.
  void stop_main_background();
  void restart_main_background();
  /// Forgets the stop without restarting the threads: the nodes restart when next read or reset.
  void leave_main_background_stopped() noexcept;

  MultiProcessingOptions options_;
  HostAllocatorPtr allocator_;  // resolved from the options at initialize()
  std::shared_ptr<detail::mp::ProcessGroup> group_;
  DataPipePtr end_;          // the main process's root
  DataPipePtr shadow_;       // the unsplit graph: seeding it advances the seeds as in process
  DataPipePtr branch_;       // the replicable branch (its worker copies run it)
  DataPipePtr merge_;        // the main process's node reading the workers
  DataPipePtr dispatched_;   // the dispatching process's branch, or null
  DataPipePtr placeholder_;  // where the dispatched elements enter the branch, or null
  std::unique_ptr<graph::BackgroundStop> main_stopped_;  // the main process's nodes, while stopped
  bool paused_ = false;
  bool distributed_ = false;  // a distributed service ran first (it reseeds every epoch)
};

}  // namespace dpipe

#pragma once
// What a MultiProcessingReadingService decides before forking: how the graph is split, and what
// each child needs to start. Private to the library.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/reading_service/reading_service.hpp>

#include "transport/element_passing.hpp"
#include "transport/merge_order.hpp"

namespace dpipe::detail::transport {
class ChildBody;
class ExceptionSlot;
class SharedPool;
template <class Order>
class RecordMerge;
}  // namespace dpipe::detail::transport

namespace dpipe::detail {
class TensorArena;
}  // namespace dpipe::detail

namespace dpipe::detail::mp {

// The service is built on the element transport (src/transport/): its wing names the transport's
// parts unqualified.
using namespace transport;  // NOLINT(google-build-using-namespace)

/// How the main process reads its workers, and a worker its dispatching child: in turn.
using WorkerMerge = RecordMerge<CyclicOrder>;

/// A worker may run ahead of its prefetch counts while the elements in flight take less than
/// this: small elements (a line, a few numbers) then cross in runs of hundreds, with one wake-up
/// per run instead of one per few elements. Memory stays bounded by this allowance. What an
/// element takes: its record for a worker process, its held_bytes() estimate for a worker thread.
inline constexpr std::uint64_t kSmallElementsBytes = std::uint64_t{64} << 10;
/// The allowance under a global order, whose checkpoint holds nothing of what is in flight (only
/// the global position): workers run further ahead of a main process that a busy core keeps from
/// running, instead of waiting for it.
inline constexpr std::uint64_t kGlobalOrderSmallElementsBytes = std::uint64_t{1} << 20;

/// torchdata's round_robin_demux buffer: how many of a worker's elements the dispatching child
/// holds while that worker takes none (BufferOverflowError beyond).
inline constexpr std::size_t kBufferSize = 1000;
/// How many feed elements a worker fed by the dispatching child takes while the main process has
/// read none of its outputs: half the buffer, so that the worker whose turn the main process
/// waits for is not left a spill of kBufferSize behind a worker that runs ahead.
inline constexpr std::uint64_t kFedLead = kBufferSize / 2;

/// The service's options, as the process group uses them.
struct GroupConfig {
  std::size_t num_workers = 0;
  std::size_t worker_prefetch_cnt = 10;
  std::size_t main_prefetch_cnt = 10;
  std::size_t queue_bytes = std::size_t{8} << 20;
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds stall_warning{0};
  WorkerInitFunction worker_init_fn;
  WorkerResetFunction worker_reset_fn;
  bool threads = false;                // the children are threads of this process, not forked processes
  HostAllocatorPtr host_allocator;     // worker threads' current allocator (null: the heap)
  std::size_t tensor_arena_bytes = 0;  // each worker process's tensor arena (0: none)
  std::uint64_t small_elements_bytes = kSmallElementsBytes;  // see kSmallElementsBytes
};

/// "worker process 1" or "worker thread 1"; "dispatching process" or "dispatching thread".
[[nodiscard]] std::string worker_name(const GroupConfig& config, std::size_t worker_id);
[[nodiscard]] std::string dispatcher_name(const GroupConfig& config);

/// What runs where.
struct GroupPlan {
  GroupConfig config;
  DataPipePtr branch;      // each worker runs a copy (its memory image, or a clone for a thread) of this graph
  DataPipePtr dispatched;  // the root of the dispatching process's graph; or null

  /// How elements leave the children and reach their readers: encoded between processes, as
  /// handles between threads.
  [[nodiscard]] const ElementPassing& passing() const noexcept {
    return config.threads ? element_handles() : encoded_elements();
  }
};

/// A checkpoint of the processes: the epoch counter and each child's fields (StateStore::to_bytes).
struct GroupState {
  std::uint64_t generation = 0;
  std::vector<std::vector<std::byte>> workers;
  std::optional<std::vector<std::byte>> dispatcher;
};

/// What a child needs to start.
struct ChildLaunch {
  const SharedPool* pool = nullptr;
  const GroupPlan* plan = nullptr;
  std::size_t worker_id = 0;             // for a worker
  pid_t parent = 0;                      // the main process; 0 for threads, which have no parent to lose
  const GroupState* restored = nullptr;  // continue from a checkpoint, or null
  ExceptionSlot* exceptions = nullptr;   // threads: one per child (workers, then the dispatcher); else null
  TensorArena* arena = nullptr;          // a worker process's tensor arena, or null
};

/// The body of worker `launch.worker_id`, built in the child.
[[nodiscard]] std::unique_ptr<ChildBody> make_worker(const ChildLaunch& launch);
/// The body of the dispatching child, built in the child.
[[nodiscard]] std::unique_ptr<ChildBody> make_dispatcher(const ChildLaunch& launch);

}  // namespace dpipe::detail::mp

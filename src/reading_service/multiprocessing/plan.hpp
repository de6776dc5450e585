#pragma once
// What a MultiProcessingReadingService decides before forking: how the graph is split, and what
// each child needs to start. Private to the library.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sys/types.h>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/reading_service/reading_service.hpp>

namespace dpipe::detail::mp {

class SharedPool;

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
};

/// What runs where.
struct GroupPlan {
  GroupConfig config;
  DataPipePtr branch;       // each worker runs a copy (the child's memory image) of this graph
  DataPipePtr placeholder;  // in `branch`, where the dispatched elements enter; or null
  DataPipePtr dispatched;   // the root of the dispatching process's graph; or null
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
  std::size_t worker_id = 0;  // for a worker
  pid_t parent = 0;
  const GroupState* restored = nullptr;  // continue from a checkpoint, or null
};

/// The body of worker process `launch.worker_id`; returns its exit status.
int run_worker(const ChildLaunch& launch) noexcept;
/// The body of the dispatching process.
int run_dispatcher(const ChildLaunch& launch) noexcept;

}  // namespace dpipe::detail::mp

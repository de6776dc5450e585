#pragma once
// GroupChild: what every child of a MultiProcessingReadingService's group is beside the
// transport's ChildLoop: a worker of its service (worker_random(), current_worker()), whose
// random generator is part of its checkpoint. Its roles, a worker and the dispatching child
// (worker_loop.cpp, dispatcher_loop.cpp), derive from it. Private to the library.

#include <string>
#include <utility>

#include "reading_service/multiprocessing/plan.hpp"
#include "transport/child_loop.hpp"

namespace dpipe::detail::mp {

/// Thread-safety: the child's one thread.
class GroupChild : public ChildLoop {
 protected:
  /// Child `name` ("worker process 1") of the group `launch` describes, running as `info` (the
  /// dispatching child: worker 0 of N) a graph yielding `expected_type`, on `slot` and `control`;
  /// a thread leaves the exceptions it reports in `exception`.
  GroupChild(const ChildLaunch& launch, std::string name, WorkerInfo info, std::string expected_type, ChildSlot& slot,
             RingMemory control, ExceptionSlot* exception);

  void save_process_state(StateWriter& process) const override;
  void load_process_state(const StateReader& process) override;

  const GroupPlan& plan_;
};

}  // namespace dpipe::detail::mp

// GroupChild: a child of a MultiProcessingReadingService's group.

#include "reading_service/multiprocessing/group_child.hpp"

#include <dpipe/core/checkpoint_schema.hpp>

#include "reading_service/worker_context.hpp"
#include "transport/shared_pool.hpp"

namespace dpipe::detail::mp {

GroupChild::GroupChild(const ChildLaunch& launch, std::string name, WorkerInfo info, std::string expected_type,
                       ChildSlot& slot, RingMemory control, ExceptionSlot* exception)
    : ChildLoop(ChildSetup{.name = std::move(name),
                           .info = info,
                           .expected_type = std::move(expected_type),
                           .slot = &slot,
                           .control = control,
                           .main_bell = &launch.pool->main_bell(),
                           .parent = launch.parent,
                           .generation = launch.restored != nullptr ? launch.restored->generation : 0,
                           .passing = &launch.plan->passing(),
                           .reset_fn = launch.plan->config.worker_reset_fn,
                           .exception = exception}),
      plan_(*launch.plan) {
  enter_worker(info_);
}

void GroupChild::save_process_state(StateWriter& process) const {
  process.write(checkpoint_schema::child::kRandom, worker_random_state());
}

void GroupChild::load_process_state(const StateReader& process) {
  set_worker_random_state(process.read<WorkerRandomState>(checkpoint_schema::child::kRandom));
}

}  // namespace dpipe::detail::mp

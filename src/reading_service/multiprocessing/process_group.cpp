// ProcessGroup: forking the children and the main process's side of the protocol.

#include "process_group.hpp"

#include <algorithm>
#include <mutex>
#include <unistd.h>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>

#include "tensor/tensor_arena.hpp"
#include "transport/child_protocol.hpp"
#include "transport/child_threads.hpp"
#include "transport/children.hpp"

namespace dpipe::detail::mp {
namespace {

constexpr std::size_t kControlRing = std::size_t{64} << 10;
constexpr std::size_t kDispatchRing = std::size_t{1} << 20;
constexpr std::size_t kReplyRing = std::size_t{1} << 20;
constexpr std::chrono::milliseconds kShutdownGrace{2000};

/// A worker thread's data ring holds handles of 8 bytes: this much room takes any prefetch count,
/// and the small elements' allowance (each counts at least its 16-byte record against it).
constexpr std::size_t kHandleRecordBytes = 64;

PoolSizes pool_sizes(const GroupPlan& plan) {
  PoolSizes sizes;
  sizes.workers = plan.config.num_workers;
  sizes.dispatcher = plan.dispatched != nullptr;
  sizes.data_ring =
      ring_capacity(plan.config.threads ? plan.config.small_elements_bytes +
                                              2 * kHandleRecordBytes *
                                                  (plan.config.worker_prefetch_cnt + plan.config.main_prefetch_cnt + 16)
                                        : plan.config.queue_bytes);
  sizes.dispatch_ring = kDispatchRing;
  sizes.control_ring = kControlRing;
  sizes.reply_ring = kReplyRing;
  return sizes;
}

/// A child's report that it cannot save its state, as the loader expects it: StateNotSupportedError
/// (the loader then replays the epoch instead) or StateError.
[[noreturn]] void throw_cannot_save(const ErrorReport& report) {
  if (report.type == "dpipe::StateNotSupportedError") throw StateNotSupportedError(report.message);
  DPIPE_THROW(StateError, "{} cannot save its state: {}: {}", report.where, report.type, report.message);
}

/// What the child of index `child` (the workers, then the dispatching process) is doing, for a
/// stall report: "it has been running its pipeline for 31.2 s: a user function may be stuck".
std::string describe_state(const SharedPool& pool, const Crew& crew, std::size_t workers, std::size_t child) {
  if (crew.is_stopped(child)) return "it is stopped (by SIGSTOP or a debugger)";
  const ActivityBoard& board = child < workers ? pool.worker(child).board : pool.dispatcher().board;
  const std::string duration = describe_duration(board.duration());
  switch (board.get()) {
    case Activity::kStarting:
      return "it has not started its pipeline yet";
    case Activity::kRunning:
      return fmt::format("it has been running its pipeline for {}: a user function may be stuck", duration);
    case Activity::kWaitingForCommand:
      return fmt::format("it has been waiting for the main process's next command for {}", duration);
    case Activity::kWaitingForRoom:
      return fmt::format("it has been waiting for room in its queue for {}", duration);
    case Activity::kWaitingForDispatcher:
      return fmt::format("it has been waiting for the dispatching process for {}", duration);
  }
  return "its state is unknown";
}

/// A stall of `waited` on worker `worker`'s data ring: the TimeoutError's text when `timed_out`,
/// else a warning's. A worker that itself waits for the dispatching process names that process.
std::string describe_stall(const SharedPool& pool, const Crew& crew, std::size_t workers, std::size_t worker,
                           std::chrono::nanoseconds waited, bool timed_out) {
  const std::string how_long = describe_duration(waited) + (timed_out ? " (the timeout)" : "");
  if (crew.size() > workers && pool.worker(worker).board.get() == Activity::kWaitingForDispatcher) {
    return fmt::format("MultiProcessingReadingService: the {} sent nothing for {} to {}, which waits for it; {}",
                       crew.who(workers), how_long, crew.who(worker), describe_state(pool, crew, workers, workers));
  }
  return fmt::format("MultiProcessingReadingService: {} sent nothing for {}; {}", crew.who(worker), how_long,
                     describe_state(pool, crew, workers, worker));
}

/// A child's reply to a checkpoint request: its state, or (kError) why it cannot save it.
struct Reply {
  RecordKind kind = RecordKind::kState;
  std::vector<std::byte> payload;
};

/// The children's states; throws for the first child that cannot save its state (after every
/// reply was read, so that none is left in a ring for the stream to trip over later).
std::vector<std::vector<std::byte>> take_states(std::vector<Reply> replies) {
  for (const Reply& reply : replies) {
    if (reply.kind == RecordKind::kError) throw_cannot_save(from_bytes<ErrorReport>(reply.payload));
  }
  std::vector<std::vector<std::byte>> states;
  states.reserve(replies.size());
  for (Reply& reply : replies) states.push_back(std::move(reply.payload));
  return states;
}

/// The children of groups whose threads did not stop, and what they use: kept for good, past
/// the end of main() too (a detached thread may still run then), so never destroyed.
void abandon(std::shared_ptr<const void> resources) {
  static std::mutex mutex;
  static auto* const abandoned = new std::vector<std::shared_ptr<const void>>();
  const std::lock_guard lock(mutex);
  abandoned->push_back(std::move(resources));
}

}  // namespace

ProcessGroup::Resources::Resources(const GroupPlan& group_plan)
    : plan(group_plan),
      pool(pool_sizes(plan)),
      exceptions(plan.config.threads ? std::make_unique<ExceptionSlot[]>(plan.config.num_workers + 1) : nullptr),
      crew(plan.config.threads ? std::unique_ptr<Crew>(std::make_unique<ChildThreads>(plan.config.host_allocator))
                               : std::unique_ptr<Crew>(std::make_unique<Children>())) {}

ProcessGroup::ProcessGroup(const GroupPlan& plan, const GroupState* restored)
    : resources_(std::make_shared<Resources>(plan)),
      plan_(resources_->plan),
      pool_(resources_->pool),
      crew_(*resources_->crew),
      generation_(resources_->generation) {
  const std::size_t workers = plan_.config.num_workers;
  if (restored != nullptr) generation_ = restored->generation;
  // Child k is worker k; the dispatching child comes last.
  const pid_t parent = plan_.config.threads ? 0 : getpid();
  ExceptionSlot* exceptions = resources_->exceptions.get();
  try {
    for (std::size_t w = 0; w < workers; ++w) {
      // Mapped before the fork: the worker's tensors lie at the same address in both processes.
      auto& arena = resources_->arenas.emplace_back(
          plan_.config.tensor_arena_bytes != 0
              ? TensorArena::create(plan_.config.tensor_arena_bytes, worker_name(plan_.config, w))
              : nullptr);
      const ChildLaunch launch{&pool_, &plan_, w, parent, restored, exceptions, arena.get()};
      crew_.start(worker_name(plan_.config, w), [launch] { return make_worker(launch); });
    }
    if (plan_.dispatched) {
      const ChildLaunch launch{&pool_, &plan_, 0, parent, restored, exceptions};
      crew_.start(dispatcher_name(plan_.config), [launch] { return make_dispatcher(launch); });
    }
  } catch (...) {
    stop();
    throw;
  }
  for (std::size_t w = 0; w < workers; ++w) controls_.emplace_back(pool_.worker_control(w));
  if (plan_.dispatched) {
    controls_.emplace_back(pool_.dispatcher_control());
    dispatcher_replies_.emplace(
        StreamLink{pool_.reply_ring(), &pool_.dispatcher().bell, nullptr, dispatcher_name(plan_.config)});
  }
  const ElementHandoff* handoff = plan_.passing().handoff(plan_.branch);
  std::vector<StreamLink> inputs;
  for (std::size_t w = 0; w < workers; ++w) {
    // The merge may outlive this group: the description reads the resources it keeps alive.
    inputs.push_back(StreamLink{pool_.data_ring(w), &pool_.worker(w).bell, nullptr, worker_name(plan_.config, w),
                                Activity::kWaitingForDispatcher,
                                [resources = resources_.get(), workers, w](auto waited, bool timed_out) {
                                  return describe_stall(resources->pool, *resources->crew, workers, w, waited,
                                                        timed_out);
                                },
                                handoff, exceptions != nullptr ? &exceptions[w] : nullptr});
    if (resources_->arenas.at(w) != nullptr) inputs.back().arena_elements = element_handles().handoff(plan_.branch);
  }
  // The merge may outlive this group (the main process's graph holds it): it keeps the resources.
  merge_ = std::make_shared<WorkerMerge>(
      std::move(inputs), endpoint(), [resources = resources_.get()] { return resources->generation; }, resources_);
  if (restored == nullptr) return;
  try {
    await_restored();
  } catch (...) {
    stop();
    throw;
  }
}

void ProcessGroup::await_restored() {
  const std::size_t workers = plan_.config.num_workers;
  std::vector<Reply> replies(workers);
  for (std::size_t w = 0; w < workers; ++w) replies[w].kind = merge_->read_reply(w, replies[w].payload);
  if (dispatcher_replies_) {
    Reply& reply = replies.emplace_back();
    reply.kind = dispatcher_replies_->read_reply(endpoint(), reply.payload);
  }
  std::vector<RestoredInput> restored_workers;
  for (const Reply& reply : replies) {
    if (reply.kind == RecordKind::kError) {
      const auto report = from_bytes<ErrorReport>(reply.payload);
      // Which process decodes a part of the checkpoint is the service's business: the same
      // corruption is the same StateError in every one of them.
      if (report.type == "dpipe::StateError") {
        DPIPE_THROW(StateError, "{} cannot restore the checkpoint: {}", report.where, report.message);
      }
      DPIPE_THROW(StateError, "{} cannot restore the checkpoint: {}: {}", report.where, report.type, report.message);
    }
    if (reply.kind != RecordKind::kRestored) {
      DPIPE_THROW(Error, "dpipe internal error: a restored process answered with a record of kind {}",
                  static_cast<int>(reply.kind));
    }
    const auto ack = from_bytes<RestoreAck>(reply.payload);
    restored_workers.push_back(RestoredInput{ack.ended, ack.failed});
  }
  restored_workers.resize(workers);  // the dispatching process feeds the workers, not the merge
  merge_->expect_restored(std::move(restored_workers));
}

ProcessGroup::~ProcessGroup() { stop(); }

ChildSlot& ProcessGroup::slot(std::size_t child) const {
  return child < plan_.config.num_workers ? pool_.worker(child) : pool_.dispatcher();
}

void ProcessGroup::send(RingWriter& control, std::size_t child, const std::vector<std::byte>& message) {
  endpoint().wait(
      [&] {
        control.request_wake_for_room(message.size());
        return control.try_write(RecordKind::kControl, message);
      },
      [&] {
        return fmt::format(
            "MultiProcessingReadingService: {} has not read its control messages for {} ms (the timeout)",
            crew_.name(child), plan_.config.timeout.count());
      },
      Activity::kWaitingForCommand);
  control.clear_wake();
  slot(child).bell.ring();
}

void ProcessGroup::send_all(const std::vector<std::byte>& message) {
  for (std::size_t child = 0; child < controls_.size(); ++child) send(controls_[child], child, message);
}

void ProcessGroup::reset(const SeedGenerator& epoch_seeds, bool reseeded, const std::optional<GlobalEpoch>& global) {
  ++generation_;
  // torchdata gives worker w `spawn(w)` every epoch, which repeats the workers' seeds in every
  // epoch of a loader seeded once. Epoch e (from 0) spawns w + N * e instead: the first epoch
  // matches torchdata and every later one gets fresh seeds. Seeds that are new every epoch
  // (`reseeded`) are spawned as torchdata does.
  const std::size_t workers = plan_.config.num_workers;
  const std::uint64_t epoch = reseeded ? 0 : generation_ - 1;
  for (std::size_t w = 0; w < workers; ++w) {
    SeedGenerator seeds = epoch_seeds;
    send(controls_[w], w,
         to_bytes(ControlMessage{Command::kReset, generation_, epoch, seeds.spawn(w + workers * epoch), global}));
  }
  if (plan_.dispatched) {
    // torchdata: each worker forwards its generator's spawn(0); the dispatcher uses worker 0's and
    // seeds from its shared stream, which the dispatcher advances past the earlier epochs' draws.
    SeedGenerator seeds = epoch_seeds;
    SeedGenerator worker0 = seeds.spawn(0);
    send(controls_.back(), workers,
         to_bytes(ControlMessage{Command::kReset, generation_, epoch, worker0.spawn(0), global}));
  }
}

void ProcessGroup::pause() {
  const auto message = to_bytes(ControlMessage{Command::kPause, ++request_});
  // Workers first: a worker finishes its element with what the dispatching process still sends.
  send_all(message);
}

void ProcessGroup::resume() {
  const auto message = to_bytes(ControlMessage{Command::kResume});
  for (std::size_t child = controls_.size(); child-- > 0;) send(controls_[child], child, message);
}

GroupState ProcessGroup::checkpoint() {
  const std::size_t workers = plan_.config.num_workers;
  const std::uint64_t request = ++request_;
  const auto pause_message = to_bytes(ControlMessage{Command::kPause, request});
  for (std::size_t w = 0; w < workers; ++w) send(controls_[w], w, pause_message);
  merge_->drain_until_paused(request);
  if (plan_.dispatched) send(controls_.back(), workers, pause_message);
  const auto checkpoint_message = to_bytes(ControlMessage{Command::kCheckpoint, request});
  for (std::size_t w = 0; w < workers; ++w) send(controls_[w], w, checkpoint_message);
  std::vector<Reply> replies(workers);
  for (std::size_t w = 0; w < workers; ++w) replies[w].kind = merge_->read_reply(w, replies[w].payload);
  if (plan_.dispatched) {
    send(controls_.back(), workers, checkpoint_message);
    Reply& reply = replies.emplace_back();
    reply.kind = dispatcher_replies_->read_reply(endpoint(), reply.payload);
  }
  GroupState state;
  state.generation = generation_;
  state.workers = take_states(std::move(replies));
  if (plan_.dispatched) {
    state.dispatcher = std::move(state.workers.back());
    state.workers.pop_back();
  }
  return state;
}

void ProcessGroup::interrupt() noexcept {
  crew_.interrupt();
  pool_.main_bell().ring();
}

void ProcessGroup::stop() noexcept {
  if (stopped_) return;
  stopped_ = true;
  for (std::size_t child = 0; child < crew_.size(); ++child) {
    slot(child).stop.store(1, std::memory_order_release);
    slot(child).bell.ring();
  }
  if (!crew_.stop(kShutdownGrace)) abandon(resources_);  // a thread that did not stop still uses them
}

std::vector<pid_t> ProcessGroup::worker_pids() const {
  auto pids = crew_.pids();
  pids.resize(std::min(pids.size(), plan_.config.num_workers));
  return pids;
}

std::optional<pid_t> ProcessGroup::dispatcher_pid() const {
  const auto pids = crew_.pids();
  if (!plan_.dispatched || pids.size() <= plan_.config.num_workers) return std::nullopt;
  return pids.back();
}

}  // namespace dpipe::detail::mp

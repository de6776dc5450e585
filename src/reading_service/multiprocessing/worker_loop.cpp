// A worker (process or thread): runs its copy of the replicable branch and streams the elements
// into its data ring.

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include <dpipe/core/detail/element_handoff.hpp>
#include <dpipe/core/element_ops.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/settings.hpp>

#include "reading_service/multiprocessing/group_child.hpp"
#include "reading_service/worker_context.hpp"
#include "tensor/tensor_arena.hpp"
#include "transport/record_merge.hpp"

namespace dpipe::detail::mp {
namespace {

/// Elements encoded between two looks at the control ring.
constexpr std::size_t kBatch = 16;
/// The most elements a starving main process is left asleep for: each wake-up costs it (and the
/// worker whose core it takes) two context switches, so small elements are read in runs of this.
constexpr std::uint64_t kMaxReaderBatch = 512;
static_assert(kUnknownHeldBytes > kGlobalOrderSmallElementsBytes && kUnknownHeldBytes > kSmallElementsBytes,
              "a thread's elements without a Serializer must keep to the prefetch counts");

/// A worker process's sink while it hands over the tensors of its arena: each element's encoding
/// writes them as references, and the element counts, while in flight, its record and the arena's
/// bytes it refers to.
class HandoverSink final : public ElementSink {
 public:
  HandoverSink(RingSink& sink, TensorArena& arena, std::uint64_t& last_referenced)
      : sink_(sink), handover_(arena), last_referenced_(last_referenced) {}
  ByteWriter& begin() override {
    handover_.begin_element();
    return sink_.begin();
  }
  void end() override {
    sink_.end_referencing(handover_.referenced_bytes());  // the record is complete: then the element ends
    last_referenced_ = std::max<std::uint64_t>(handover_.end_element(), 1);
  }

 private:
  RingSink& sink_;
  TensorHandoverScope handover_;
  std::uint64_t& last_referenced_;
};

class Worker final : public GroupChild {
 public:
  explicit Worker(const ChildLaunch& launch)
      : GroupChild(launch, worker_name(launch.plan->config, launch.worker_id),
                   WorkerInfo{launch.plan->config.num_workers, launch.worker_id}, launch.plan->branch->element_type(),
                   launch.pool->worker(launch.worker_id), launch.pool->worker_control(launch.worker_id),
                   launch.exceptions != nullptr ? &launch.exceptions[launch.worker_id] : nullptr),
        sink_(launch.pool->data_ring(launch.worker_id), endpoint_, &launch.pool->main_bell(), "the main process"),
        budget_(
            std::max<std::size_t>(1, plan_.config.worker_prefetch_cnt +
                                         (plan_.config.main_prefetch_cnt + info_.num_workers - 1) / info_.num_workers)),
        arena_(launch.arena) {
    // Only a forked worker has an arena; it is built and run by the child's one thread.
    if (arena_ != nullptr) arena_allocator_.emplace(arena_->allocator());
    if (plan_.passing().handoff(plan_.branch) != nullptr || arena_ != nullptr) sink_.count_held_bytes();
    sink_.writer().set_reader_batch(budget_ / 2 + 1);
    start([&] { build_graph(launch); },
          launch.restored != nullptr ? &launch.restored->workers.at(info_.worker_id) : nullptr);
  }

 private:
  void build_graph(const ChildLaunch& launch) {
    // A forked worker runs the branch of its memory image; a thread its own copy.
    root_ = plan_.config.threads ? graph::clone(plan_.branch) : plan_.branch;
    if (plan_.dispatched) {
      const SharedPool& pool = *launch.pool;
      const std::size_t w = info_.worker_id;
      feed_header_ = pool.dispatch_ring(w).header;
      fed_at_release_ = fed();
      StreamLink link{pool.dispatch_ring(w),
                      &pool.dispatcher().bell,
                      &pool.dispatcher().bell,
                      dispatcher_name(plan_.config),
                      Activity::kWaitingForDispatcher,
                      {},
                      plan_.passing().handoff(plan_.dispatched),
                      launch.exceptions != nullptr ? &launch.exceptions[info_.num_workers] : nullptr};
      link.count_stored = false;  // see StreamLink::count_stored
      feed_ = std::make_shared<WorkerMerge>(std::vector<StreamLink>{std::move(link)}, endpoint_,
                                            [this] { return progress_.generation; });
      auto receiver = plan_.passing().receiver(plan_.dispatched, feed_, "from_dispatcher");
      const auto placeholders = graph::find_dps<PlaceholderTag>(graph::traverse_dps(root_));
      if (placeholders.size() != 1) {
        DPIPE_THROW(Error, "dpipe internal error: the branch holds {} placeholders for the dispatched branch",
                    placeholders.size());
      }
      root_ = graph::replace_dp(graph::traverse_dps(root_), std::dynamic_pointer_cast<DataPipe>(placeholders.front()),
                                receiver)
                  .root();
    }
    graph::apply_sharding(root_, info_.num_workers, info_.worker_id, ShardingPriority::kMultiprocessing);
    set_root(plan_.config.worker_init_fn ? plan_.config.worker_init_fn(root_, info_) : root_);
  }

  void seed(SeedGenerator& seeds, std::uint64_t /*epoch*/) override {
    // torchdata seeds Python's and torch's generators with the first two worker-stream values.
    const auto first = seeds.generate_seed();
    seed_worker(first, seeds.generate_seed());
    graph::set_graph_random_seed(root_, seeds);
  }

  /// Room for another element: fewer than the prefetch counts are in flight, or the elements in
  /// flight are small ones that together take less than the allowance; a fed worker keeps
  /// within its lead; and a worker with a tensor arena within its arena_room().
  [[nodiscard]] bool has_room() override {
    const std::uint64_t in_flight = sink_.writer().elements_in_flight();
    return (in_flight < budget_ || small_elements_room() > 0) && within_lead() && (in_flight == 0 || arena_room() > 0);
  }
  /// The bytes of arena tensors this worker may still send: what its elements in flight hold is
  /// kept within queue_bytes, as a worker without an arena keeps them within its ring (has_room()
  /// always allows one element). Unlimited without an arena.
  [[nodiscard]] std::uint64_t arena_room() {
    if (arena_ == nullptr) return UINT64_MAX;
    const std::uint64_t bytes = sink_.writer().elements_in_flight() == 0 ? 0 : sink_.bytes_in_flight();
    return bytes < plan_.config.queue_bytes ? plan_.config.queue_bytes - bytes : 0;
  }
  /// The feed elements this worker has taken (and released) from its dispatch ring, ever.
  [[nodiscard]] std::uint64_t fed() const { return feed_header_->released_elements.load(std::memory_order_acquire); }
  /// Whether a worker fed by the dispatching child may take more of its feed: the main process has
  /// read all of its outputs, or it took fewer than kFedLead feed elements since the last output the
  /// main process read. The main process reads the workers in turn: a worker that ran further ahead
  /// of the one it waits for would leave the dispatching child holding more than kBufferSize of
  /// that worker's share.
  [[nodiscard]] bool within_lead() {
    if (feed_header_ == nullptr) return true;
    const std::uint64_t in_flight = sink_.writer().elements_in_flight();
    while (fed_at_output_.size() > in_flight) {
      fed_at_release_ = fed_at_output_.front();
      fed_at_output_.pop_front();
    }
    return in_flight == 0 || fed() - fed_at_release_ < kFedLead;
  }
  /// The bytes the allowance for small elements still has room for.
  [[nodiscard]] std::uint64_t small_elements_room() {
    const std::uint64_t bytes = sink_.bytes_in_flight();
    const std::uint64_t allowance = plan_.config.small_elements_bytes;
    return bytes < allowance ? allowance - bytes : 0;
  }
  /// The average size (at least 1) of the elements in flight, of which there were `in_flight`
  /// when the caller looked (the main process may have read some since), or 0 when none was.
  [[nodiscard]] std::uint64_t average_in_flight(std::uint64_t in_flight) {
    return in_flight == 0 ? 0 : std::max<std::uint64_t>(1, sink_.bytes_in_flight() / in_flight);
  }

  void produce() override {
    const auto in_flight = static_cast<std::size_t>(sink_.writer().elements_in_flight());
    const std::uint64_t average = average_in_flight(in_flight);
    if (average != 0) {
      // Wake the main process for half of what may be in flight, in runs of up to kMaxReaderBatch.
      sink_.writer().set_reader_batch(std::max<std::uint64_t>(
          budget_ / 2 + 1, std::min<std::uint64_t>(plan_.config.small_elements_bytes / 2 / average, kMaxReaderBatch)));
    }
    std::size_t wanted = 0;
    if (feed_header_ != nullptr) {
      // One output at a time: within_lead() looks again before the next.
      wanted = 1;
    } else if (in_flight < budget_) {
      wanted = std::min(kBatch, budget_ - in_flight);
    } else {
      // As many as fit the allowance at the average size of those in flight.
      wanted = static_cast<std::size_t>(std::clamp<std::uint64_t>(small_elements_room() / average, 1, kBatch));
    }
    if (arena_ != nullptr) {
      // Elements the size of the last one, within the arena's room; one at a time until a size is known.
      const std::uint64_t size = std::max(average, arena_element_bytes_);
      wanted = size == 0 ? 1 : static_cast<std::size_t>(std::clamp<std::uint64_t>(arena_room() / size, 1, wanted));
    }
    const std::uint64_t ended_before = sink_.elements_ended();
    const auto count_written = [&] { progress_.produced += sink_.elements_ended() - ended_before; };
    std::size_t written = 0;
    try {
      if (arena_ != nullptr) {
        HandoverSink handover(sink_, *arena_, arena_element_bytes_);
        written = encoder_->encode(wanted, handover);
      } else {
        written = encoder_->encode(wanted, sink_);
      }
    } catch (...) {
      count_written();  // the elements before the failure were written
      throw;
    }
    count_written();
    if (feed_header_ != nullptr && written == 1) fed_at_output_.push_back(fed());
    if (written < wanted) {
      progress_.ended = true;
      sink_.write_record(RecordKind::kEnd, {});
    }
    sink_.flush();
  }

  void broadcast(RecordKind kind, std::span<const std::byte> payload) override { sink_.write_record(kind, payload); }
  [[nodiscard]] RingSink& replies() override { return sink_; }

  void before_checkpoint(std::uint64_t request) override {
    if (feed_) feed_->drain_until_paused(request);
  }

  void wake_readers() override { sink_.wake_reader_before_waiting(); }
  // While an epoch runs, woken when the main process has read half of what is in flight: of the
  // prefetch counts, or of the small elements' allowance. A worker waiting for a command wants no
  // wake-up per element read (the command rings its bell), which the many small elements in flight
  // at an epoch's end or a pause would cost.
  void request_wakes() override {
    if (!epoch_running()) {
      sink_.writer().clear_wake();
      return;
    }
    if (!sink_.counts_held_bytes()) {
      sink_.writer().request_wake_for_elements(budget_ / 2, plan_.config.small_elements_bytes / 2);
      return;
    }
    // The ring cannot count what a thread's elements hold: half the allowance, in elements of the
    // average size in flight.
    const std::uint64_t average = average_in_flight(sink_.writer().elements_in_flight());
    const std::uint64_t half_allowance = average == 0 ? 0 : plan_.config.small_elements_bytes / 2 / average;
    sink_.writer().request_wake_for_elements(std::max<std::uint64_t>(budget_ / 2, half_allowance));
  }
  void clear_wakes() override { sink_.writer().clear_wake(); }

  RingSink sink_;
  std::size_t budget_;
  // A worker process's tensor arena (or null), and the scope making its allocator the worker's
  // current one; the arena bytes the last element referred to (at least 1 once one was written).
  TensorArena* arena_;
  std::optional<ScopedHostAllocator> arena_allocator_;
  std::uint64_t arena_element_bytes_ = 0;
  std::shared_ptr<WorkerMerge> feed_;  // from the dispatching process, if one runs
  // A fed worker's lead (within_lead()): its dispatch ring's header; per output written and maybe
  // still in flight, oldest first, the feed elements taken when it was written; and that count at
  // the last output the main process read.
  const RingHeader* feed_header_ = nullptr;
  std::deque<std::uint64_t> fed_at_output_;
  std::uint64_t fed_at_release_ = 0;
};

}  // namespace

std::unique_ptr<ChildBody> make_worker(const ChildLaunch& launch) { return std::make_unique<Worker>(launch); }

}  // namespace dpipe::detail::mp

// The dispatching child (process or thread): runs the dispatched branch once and deals element j
// to worker j mod N through the dispatch rings.

#include <algorithm>
#include <utility>

#include <dpipe/core/capabilities.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/settings.hpp>

#include "reading_service/multiprocessing/group_child.hpp"
#include "reading_service/worker_context.hpp"

namespace dpipe::detail::mp {
namespace {

class Dispatcher final : public GroupChild {
 public:
  explicit Dispatcher(const ChildLaunch& launch)
      : GroupChild(launch, dispatcher_name(launch.plan->config), WorkerInfo{launch.plan->config.num_workers, 0},
                   launch.plan->dispatched->element_type(), launch.pool->dispatcher(),
                   launch.pool->dispatcher_control(),
                   launch.exceptions != nullptr ? &launch.exceptions[launch.plan->config.num_workers] : nullptr),
        reply_(launch.pool->reply_ring(), endpoint_, &launch.pool->main_bell(), "the main process") {
    const std::uint64_t budget = std::max<std::size_t>(1, plan_.config.worker_prefetch_cnt);
    const ElementHandoff* handoff = plan_.passing().handoff(plan_.dispatched);
    for (std::size_t w = 0; w < info_.num_workers; ++w) {
      outlets_.push_back(std::make_unique<RingSink>(launch.pool->dispatch_ring(w), endpoint_,
                                                    &launch.pool->worker(w).bell, worker_name(plan_.config, w),
                                                    RingSink::Mode::kSpilling, budget, handoff));
    }
    start([&] { set_root(plan_.config.threads ? graph::clone(plan_.dispatched) : plan_.dispatched); },
          launch.restored != nullptr && launch.restored->dispatcher ? &*launch.restored->dispatcher : nullptr);
  }

 private:
  /// The worker that gets the next element.
  [[nodiscard]] RingSink& target() { return *outlets_[progress_.produced % outlets_.size()]; }

  void seed(SeedGenerator& seeds, std::uint64_t epoch) override {
    // torchdata seeds the dispatching process's global generators and every random node from the
    // shared stream, identical in every rank. Skipping what earlier epochs drew gives each epoch
    // new seeds (torchdata repeats the first epoch's).
    const auto random_nodes = graph::find_dps<RandomDataPipe>(graph::traverse_dps(root_)).size();
    for (std::uint64_t skip = epoch * (2 + random_nodes); skip > 0; --skip) (void)seeds.generate_shared_seed();
    const auto first = seeds.generate_shared_seed();
    seed_worker(first, seeds.generate_shared_seed());
    graph::set_datapipes_seed(graph::list_dps(graph::traverse_dps(root_)), seeds, true);
  }

  /// Deals when the next worker has room, or when some worker waits with nothing on its way (then
  /// the next worker's share waits in its spill queue, as torchdata's round_robin_demux buffers).
  [[nodiscard]] bool has_room() override {
    if (target().has_room()) return true;
    return std::ranges::any_of(outlets_, [](const auto& outlet) {
      return !outlet->has_spilled() && outlet->writer().reader_starving() && outlet->writer().drained();
    });
  }

  void produce() override {
    RingSink& outlet = target();
    if (encoder_->encode(1, outlet) == 0) {
      progress_.ended = true;
      broadcast(RecordKind::kEnd, {});
      return;
    }
    // Raised at the element dealt (progress_.produced counts it once it has room).
    if (outlet.spilled_elements() > kBufferSize) {
      DPIPE_THROW(BufferOverflowError, "DemultiplexerIterDataPipe buffer overflow, buffer size {} is insufficient.",
                  kBufferSize);
    }
    ++progress_.produced;
  }

  /// Every worker gets the record after what it was dealt before it.
  void broadcast(RecordKind kind, std::span<const std::byte> payload) override {
    for (auto& outlet : outlets_) outlet->write_record(kind, payload);
  }
  [[nodiscard]] RingSink& replies() override { return reply_; }

  void before_checkpoint(std::uint64_t /*request*/) override {
    if (std::ranges::any_of(outlets_, [](const auto& outlet) { return outlet->has_spilled(); })) {
      DPIPE_THROW(StateError, "dpipe internal error: the dispatching process was checkpointed with records in flight");
    }
  }

  void flush() override {
    for (auto& outlet : outlets_) outlet->flush();
  }
  // A worker waiting for its feed asks for several elements before it is woken; dealt one while
  // another worker's share blocks this process, it would otherwise sleep until its own timer.
  void wake_readers() override {
    for (auto& outlet : outlets_) outlet->wake_reader_before_waiting();
  }
  [[nodiscard]] bool can_flush() override {
    return std::ranges::any_of(outlets_, [](const auto& outlet) { return outlet->can_flush(); });
  }
  void request_wakes() override {
    for (auto& outlet : outlets_) outlet->request_wake_when_unblocked();
  }
  void clear_wakes() override {
    for (auto& outlet : outlets_) outlet->writer().clear_wake();
  }
  void drop_pending() override {
    for (auto& outlet : outlets_) outlet->drop_spilled();
  }

  RingSink reply_;
  std::vector<std::unique_ptr<RingSink>> outlets_;
};

}  // namespace

std::unique_ptr<ChildBody> make_dispatcher(const ChildLaunch& launch) { return std::make_unique<Dispatcher>(launch); }

}  // namespace dpipe::detail::mp

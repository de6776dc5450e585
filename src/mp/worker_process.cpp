// The body of a worker process: runs its copy of the replicable branch and streams the elements
// into its data ring, obeying the main process's control messages.

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/settings.hpp>

#include "child_process.hpp"
#include "process_group.hpp"
#include "ring_sink.hpp"
#include "worker_context.hpp"

namespace dpipe::detail::mp {
namespace {

/// Elements encoded between two looks at the control ring.
constexpr std::size_t kBatch = 16;

class WorkerProcess {
 public:
  explicit WorkerProcess(const ChildLaunch& launch)
      : plan_(*launch.plan),
        info_{plan_.options.num_workers, launch.worker_id},
        name_(fmt::format("worker process {}", launch.worker_id)),
        liveness_(launch.pool->worker(launch.worker_id), launch.parent),
        endpoint_{&launch.pool->worker(launch.worker_id).bell, &liveness_, std::chrono::milliseconds(0)},
        control_(launch.pool->worker_control(launch.worker_id), launch.pool->main_bell()),
        sink_(launch.pool->data_ring(launch.worker_id), endpoint_, &launch.pool->main_bell(), "the main process"),
        budget_(std::max<std::size_t>(
            1, plan_.options.worker_prefetch_cnt +
                   (plan_.options.main_prefetch_cnt + info_.num_workers - 1) / info_.num_workers)) {
    enter_worker(info_);
    report_failures(
        name_,
        [&] {
          build_graph(*launch.pool);
          if (launch.restored != nullptr) restore_child(launch.restored->workers.at(info_.worker_id), progress_, root_);
        },
        [&](ErrorReport report) {
          // Reported after the acknowledgement of the next epoch, which the main process waits
          // for; a restored main process reads on without one: it hears it now.
          startup_error_ = std::move(report);
          progress_.active = false;
          if (launch.restored != nullptr) fail(*startup_error_);
        });
  }

  int run() {
    try {
      for (;;) {
        while (handle_control()) {
        }
        if (liveness_.stop_requested()) return 0;
        if (can_produce()) {
          produce();
          continue;
        }
        sink_.wake_reader_before_waiting();
        endpoint_.wait(
            [&] {
              // Woken when the main process has read half of what is in flight.
              sink_.writer().request_wake_for_elements(budget_ / 2);
              return control_.pending() || can_produce() || liveness_.stop_requested();
            },
            [] { return std::string(); });
        sink_.writer().clear_wake();
      }
    } catch (const Interrupted&) {
      return 0;
    }
  }

 private:
  void build_graph(const SharedPool& pool) {
    root_ = plan_.branch;
    if (plan_.dispatched) {
      const std::size_t w = info_.worker_id;
      feed_ = std::make_shared<RecordMerge>(
          std::vector<MergeInput>{MergeInput{pool.dispatch_ring(w), &pool.dispatcher().bell, &pool.dispatcher().bell,
                                             "dispatching process"}},
          endpoint_, [this] { return progress_.generation; });
      auto decoder = plan_.dispatched->make_decoder(feed_, "from_dispatcher");
      root_ = graph::replace_dp(graph::traverse_dps(root_), plan_.placeholder, decoder).root();
    }
    graph::apply_sharding(root_, info_.num_workers, info_.worker_id, ShardingPriority::kMultiprocessing);
    if (plan_.options.worker_init_fn) set_root(plan_.options.worker_init_fn(root_, info_));
    set_root(root_);
  }

  /// Runs `root` from now on; it must yield what the branch yields.
  void set_root(DataPipePtr root) {
    if (!root || root->element_type() != plan_.branch->element_type()) {
      DPIPE_THROW(InvalidArgument, "{}: worker_init_fn and worker_reset_fn must return an iter pipe of {}, got {}",
                  name_, plan_.branch->element_type(), root ? root->element_type() : std::string("nothing"));
    }
    if (root == root_ && encoder_) return;
    root_ = std::move(root);
    encoder_ = root_->make_encoder();
  }

  [[nodiscard]] bool can_produce() const {
    return progress_.active && !paused_ && !progress_.ended && !progress_.failed &&
           sink_.writer().elements_in_flight() < budget_;
  }

  void produce() {
    const std::size_t wanted =
        std::min(kBatch, budget_ - static_cast<std::size_t>(sink_.writer().elements_in_flight()));
    report_failures(
        name_,
        [&] {
          if (encoder_->encode(wanted, sink_) < wanted) {
            progress_.ended = true;
            sink_.write_record(RecordKind::kEnd, {});
          }
        },
        [&](const ErrorReport& report) { fail(report); });
    sink_.flush();
  }

  void fail(const ErrorReport& report) {
    progress_.failed = true;
    sink_.write_record(RecordKind::kError, to_bytes(report));
  }

  /// Handles one control message; false when none is waiting.
  bool handle_control() {
    const auto message = control_.poll();
    if (!message) return false;
    switch (message->command) {
      case Command::kReset:
        reset(message->value, *message->seeds);
        break;
      case Command::kPause:
        paused_ = true;
        sink_.write_record(RecordKind::kPaused, marker_payload(message->value));
        break;
      case Command::kResume:
        paused_ = false;
        break;
      case Command::kCheckpoint:
        checkpoint(message->value);
        break;
    }
    return true;
  }

  void reset(std::uint64_t generation, SeedGenerator seeds) {
    progress_.start(generation);
    paused_ = false;
    sink_.write_record(RecordKind::kResetAck, marker_payload(generation));
    if (startup_error_) {
      fail(*startup_error_);
      return;
    }
    report_failures(
        name_,
        [&] {
          // torchdata seeds Python's and torch's generators with the first two worker-stream values.
          const auto first = seeds.generate_seed();
          seed_worker(first, seeds.generate_seed());
          graph::set_graph_random_seed(root_, seeds);
          if (plan_.options.worker_reset_fn) set_root(plan_.options.worker_reset_fn(root_, info_, seeds));
          dynamic_cast<IterDataPipeBase&>(*root_).reset();
        },
        [&](const ErrorReport& report) { fail(report); });
  }

  void checkpoint(std::uint64_t request) {
    report_failures(
        name_,
        [&] {
          if (feed_) feed_->drain_until_paused(request);
          sink_.write_record(RecordKind::kState, save_child(progress_, root_));
        },
        [&](const ErrorReport& report) { sink_.write_record(RecordKind::kError, to_bytes(report)); });
  }

  const GroupPlan& plan_;
  WorkerInfo info_;
  std::string name_;
  ChildLiveness liveness_;
  Endpoint endpoint_;
  ControlReader control_;
  RingSink sink_;
  std::size_t budget_;
  DataPipePtr root_;
  std::unique_ptr<ElementEncoder> encoder_;
  std::shared_ptr<RecordMerge> feed_;  // from the dispatching process, if one runs
  std::optional<ErrorReport> startup_error_;
  ChildProgress progress_;
  bool paused_ = false;
};

}  // namespace

int run_worker(const ChildLaunch& launch) noexcept { return run_child<WorkerProcess>(launch); }

}  // namespace dpipe::detail::mp

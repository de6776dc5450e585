// The body of the dispatching process: runs the dispatched branch once and deals element j to
// worker j mod N through the dispatch rings.

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/settings.hpp>

#include "child_process.hpp"
#include "process_group.hpp"
#include "ring_sink.hpp"
#include "worker_context.hpp"

namespace dpipe::detail::mp {
namespace {

/// torchdata's round_robin_demux buffer: how far one worker may fall behind the others.
constexpr std::size_t kBufferSize = 1000;

/// Collects one encoded element in a vector.
class VectorSink final : public ElementSink {
 public:
  explicit VectorSink(std::vector<std::byte>& out) : out_(&out), writer_(out) {}
  ByteWriter& begin() override {
    out_->clear();
    return writer_;
  }
  void end() override {}

 private:
  std::vector<std::byte>* out_;
  ByteWriter writer_;
};

/// A record waiting for room in a worker's ring; `sent` bytes of it are already there.
struct Pending {
  RecordKind kind = RecordKind::kElement;
  std::vector<std::byte> bytes;
  std::size_t sent = 0;
};

/// One worker's ring, written without blocking: what does not fit waits in `pending`.
struct Outlet {
  RingWriter writer;
  Bell* bell = nullptr;  // the worker's
  std::deque<Pending> pending;
};

class DispatcherProcess {
 public:
  explicit DispatcherProcess(const ChildLaunch& launch)
      : plan_(*launch.plan),
        workers_(plan_.options.num_workers),
        liveness_(launch.pool->dispatcher(), launch.parent),
        endpoint_{&launch.pool->dispatcher().bell, &liveness_, std::chrono::milliseconds(0)},
        control_(launch.pool->dispatcher_control(), launch.pool->main_bell()),
        reply_(launch.pool->reply_ring(), endpoint_, &launch.pool->main_bell(), "the main process"),
        budget_(std::max<std::size_t>(1, plan_.options.worker_prefetch_cnt)),
        root_(plan_.dispatched),
        encoder_(root_->make_encoder()) {
    enter_worker(WorkerInfo{workers_, 0});
    for (std::size_t w = 0; w < workers_; ++w) {
      outlets_.push_back(Outlet{RingWriter(launch.pool->dispatch_ring(w)), &launch.pool->worker(w).bell, {}});
    }
    if (launch.restored != nullptr) {
      report_failures(
          kName, [&] { restore_child(*launch.restored->dispatcher, progress_, root_); },
          [&](const ErrorReport& report) { fail(report); });
    }
  }

  int run() {
    try {
      for (;;) {
        while (handle_control()) {
        }
        if (liveness_.stop_requested()) return 0;
        flush();
        if (can_deal()) {
          deal();
          continue;
        }
        endpoint_.wait(
            [&] {
              request_wakes();
              return control_.pending() || can_flush() || can_deal() || liveness_.stop_requested();
            },
            [] { return std::string(); });
        for (auto& outlet : outlets_) outlet.writer.clear_wake();
      }
    } catch (const Interrupted&) {
      return 0;
    }
  }

 private:
  inline static const std::string kName = "dispatching process";

  /// The worker that gets the next element.
  [[nodiscard]] Outlet& target() { return outlets_[progress_.dealt % workers_]; }

  [[nodiscard]] bool has_room(const Outlet& outlet) const {
    return outlet.pending.empty() && outlet.writer.elements_in_flight() < budget_;
  }

  /// Deals when the next worker has room, or when some worker waits with nothing on its way (then
  /// the next worker's share is buffered, as torchdata's round_robin_demux does).
  [[nodiscard]] bool can_deal() {
    if (!progress_.active || paused_ || progress_.ended || progress_.failed) return false;
    if (has_room(target())) return true;
    return std::ranges::any_of(outlets_, [](const Outlet& outlet) {
      return outlet.pending.empty() && outlet.writer.reader_starving() && outlet.writer.drained();
    });
  }

  void deal() {
    report_failures(
        kName,
        [&] {
          VectorSink sink(encoded_);
          if (encoder_->encode(1, sink) == 0) {
            progress_.ended = true;
            for (auto& outlet : outlets_) outlet.pending.push_back(Pending{RecordKind::kEnd, {}, 0});
            return;
          }
          Outlet& outlet = target();
          ++progress_.dealt;
          if (has_room(outlet) && encoded_.size() <= outlet.writer.max_payload() &&
              outlet.writer.try_write(RecordKind::kElement, encoded_)) {
            outlet.bell->ring();
            return;
          }
          outlet.pending.push_back(Pending{RecordKind::kElement, encoded_, 0});
          if (outlet.pending.size() > kBufferSize) {
            DPIPE_THROW(BufferOverflowError,
                        "DemultiplexerIterDataPipe buffer overflow, buffer size {} is insufficient.", kBufferSize);
          }
        },
        [&](const ErrorReport& report) { fail(report); });
  }

  /// Every worker gets the error after what it was dealt before it.
  void fail(const ErrorReport& report) {
    progress_.failed = true;
    const auto bytes = to_bytes(report);
    for (auto& outlet : outlets_) outlet.pending.push_back(Pending{RecordKind::kError, bytes, 0});
  }

  /// Moves pending records into the rings as far as they have room.
  void flush() {
    for (auto& outlet : outlets_) {
      bool wrote = false;
      while (!outlet.pending.empty()) {
        Pending& record = outlet.pending.front();
        if (record.kind == RecordKind::kElement && record.sent == 0 && outlet.writer.elements_in_flight() >= budget_) {
          break;
        }
        const std::size_t left = record.bytes.size() - record.sent;
        const auto room = outlet.writer.claim(std::min(left, outlet.writer.max_payload()));
        if (room.empty()) break;
        const std::size_t part = std::min(left, room.size());
        std::copy_n(record.bytes.data() + record.sent, part, room.data());
        record.sent += part;
        const bool more = record.sent < record.bytes.size();
        outlet.writer.commit(record.kind, part, more);
        wrote = true;
        if (!more) outlet.pending.pop_front();
      }
      if (wrote) {
        outlet.writer.publish();
        outlet.bell->ring();
      }
    }
  }

  [[nodiscard]] bool can_flush() {
    return std::ranges::any_of(outlets_, [&](Outlet& outlet) {
      if (outlet.pending.empty()) return false;
      const Pending& record = outlet.pending.front();
      if (record.kind == RecordKind::kElement && record.sent == 0 && outlet.writer.elements_in_flight() >= budget_) {
        return false;
      }
      const std::size_t left = record.bytes.size() - record.sent;
      return !outlet.writer.claim(std::min(left, outlet.writer.max_payload())).empty();
    });
  }

  /// Asks each worker to ring this process's bell when what blocks its outlet clears: a full
  /// element budget, or a ring without room for the next record.
  void request_wakes() {
    for (auto& outlet : outlets_) {
      if (outlet.writer.elements_in_flight() >= budget_) {
        outlet.writer.request_wake_for_elements(budget_ - 1);
      } else if (!outlet.pending.empty()) {
        const Pending& record = outlet.pending.front();
        outlet.writer.request_wake_for_room(std::min(record.bytes.size() - record.sent, outlet.writer.max_payload()));
      } else {
        outlet.writer.clear_wake();  // nothing blocks it
      }
    }
  }

  /// Handles one control message; false when none is waiting.
  bool handle_control() {
    const auto message = control_.poll();
    if (!message) return false;
    switch (message->command) {
      case Command::kReset:
        reset(message->value, *message->seeds, message->epoch);
        break;
      case Command::kPause: {
        paused_ = true;
        const auto marker = marker_payload(message->value);
        for (auto& outlet : outlets_) outlet.pending.push_back(Pending{RecordKind::kPaused, marker, 0});
        break;
      }
      case Command::kResume:
        paused_ = false;
        break;
      case Command::kCheckpoint:
        checkpoint();
        break;
    }
    return true;
  }

  /// Starts epoch `generation`, the loader's epoch `epoch` (from 0) of this process group.
  void reset(std::uint64_t generation, SeedGenerator seeds, std::uint64_t epoch) {
    progress_.start(generation);
    paused_ = false;
    const auto ack = marker_payload(generation);
    for (auto& outlet : outlets_) {
      // A record partly in the ring must be finished: its reader drops it whole.
      while (outlet.pending.size() > 1 || (outlet.pending.size() == 1 && outlet.pending.front().sent == 0)) {
        outlet.pending.pop_back();
      }
      outlet.pending.push_back(Pending{RecordKind::kResetAck, ack, 0});
    }
    report_failures(
        kName,
        [&] {
          // torchdata seeds the dispatching process's global generators and every random node from
          // the shared stream, identical in every rank. Skipping what earlier epochs drew gives
          // each epoch new seeds (torchdata repeats the first epoch's).
          const auto random_nodes = graph::find_dps<RandomDataPipe>(graph::traverse_dps(root_)).size();
          for (std::uint64_t skip = epoch * (2 + random_nodes); skip > 0; --skip) (void)seeds.generate_shared_seed();
          const auto first = seeds.generate_shared_seed();
          seed_worker(first, seeds.generate_shared_seed());
          graph::set_datapipes_seed(graph::list_dps(graph::traverse_dps(root_)), seeds, true);
          if (plan_.options.worker_reset_fn) {
            auto root = plan_.options.worker_reset_fn(root_, WorkerInfo{workers_, 0}, seeds);
            if (root != root_) {
              if (!root || root->element_type() != plan_.dispatched->element_type()) {
                DPIPE_THROW(InvalidArgument, "dispatching process: worker_reset_fn must return an iter pipe of {}",
                            plan_.dispatched->element_type());
              }
              root_ = std::move(root);
              encoder_ = root_->make_encoder();
            }
          }
          dynamic_cast<IterDataPipeBase&>(*root_).reset();
        },
        [&](const ErrorReport& report) { fail(report); });
  }

  void checkpoint() {
    report_failures(
        kName,
        [&] {
          if (std::ranges::any_of(outlets_, [](const Outlet& outlet) { return !outlet.pending.empty(); })) {
            DPIPE_THROW(StateError,
                        "dpipe internal error: the dispatching process was checkpointed with records in flight");
          }
          reply_.write_record(RecordKind::kState, save_child(progress_, root_));
        },
        [&](const ErrorReport& report) { reply_.write_record(RecordKind::kError, to_bytes(report)); });
  }

  const GroupPlan& plan_;
  std::size_t workers_;
  ChildLiveness liveness_;
  Endpoint endpoint_;
  ControlReader control_;
  RingSink reply_;
  std::size_t budget_;
  DataPipePtr root_;
  std::unique_ptr<ElementEncoder> encoder_;
  std::vector<Outlet> outlets_;
  std::vector<std::byte> encoded_;
  ChildProgress progress_;
  bool paused_ = false;
};

}  // namespace

int run_dispatcher(const ChildLaunch& launch) noexcept { return run_child<DispatcherProcess>(launch); }

}  // namespace dpipe::detail::mp

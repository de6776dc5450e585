#pragma once
// ChildLoop: the loop a child (a forked process or a thread) of a service built on the transport
// runs, whatever its role. It runs its graph epoch after epoch and obeys its main side's control
// messages (child_protocol.hpp): it starts and seeds epochs, pauses, resumes, and answers
// checkpoints through its reply sink, and reports failures as error records. The roles a service
// derives from it (MultiProcessingReadingService's worker and dispatching child) differ only in
// how they seed their graph, where its elements go and what else of their process they save.
// Private to the library.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/element_codec.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/global/global_epoch.hpp>
#include <dpipe/random/seed_generator.hpp>
#include <dpipe/reading_service/reading_service.hpp>

#include "transport/child_protocol.hpp"
#include "transport/crew.hpp"
#include "transport/element_passing.hpp"
#include "transport/endpoint.hpp"
#include "transport/error_report.hpp"
#include "transport/ring.hpp"
#include "transport/ring_sink.hpp"
#include "transport/shared_pool.hpp"

namespace dpipe::detail::transport {

/// A child stops waiting when the main process tells it to stop, and a child process exits at
/// once when the main process is gone.
class ChildLiveness final : public Liveness {
 public:
  ChildLiveness(const ChildSlot& slot, pid_t parent) : slot_(&slot), parent_(parent) {}
  void check(bool thorough) override;
  /// Whether the main process asked this child to stop.
  [[nodiscard]] bool stop_requested() const noexcept { return slot_->stop.load(std::memory_order_acquire) != 0; }

 private:
  const ChildSlot* slot_;
  pid_t parent_;
};

/// Where a child is in its epochs; part of its checkpoint.
struct ChildProgress {
  std::uint64_t generation = 0;  // the epoch it runs (see protocol.hpp)
  bool active = false;           // an epoch was started
  bool ended = false;            // its stream ended in this epoch
  bool failed = false;           // it reported an error in this epoch
  std::uint64_t produced = 0;    // elements it wrote in this epoch (the dispatching process: dealt)
  DPIPE_FIELDS(generation, active, ended, failed, produced)

  /// Starts epoch `next`.
  void start(std::uint64_t next) noexcept {
    generation = next;
    active = true;
    ended = failed = false;
    produced = 0;
  }
};

/// What a child needs to run its loop.
struct ChildSetup {
  std::string name;                         // "worker process 1"
  WorkerInfo info;                          // which of its service's children it is
  std::string expected_type;                // what its graph yields
  ChildSlot* slot = nullptr;                // its bell, stop flag and activity board
  RingMemory control;                       // the main side's messages to it
  Bell* main_bell = nullptr;                // rung when it frees room in the control ring
  pid_t parent = 0;                         // the main process it dies with; 0 for a thread
  std::uint64_t generation = 0;             // the main side's epoch when the child started
  const ElementPassing* passing = nullptr;  // how its elements leave it
  WorkerResetFunction reset_fn;             // called every epoch after seeding, if set
  ExceptionSlot* exception = nullptr;       // a thread leaves the exceptions it reports here
};

/// Thread-safety: the child's one thread.
class ChildLoop : public ChildBody {
 public:
  ChildLoop(const ChildLoop&) = delete;
  ChildLoop& operator=(const ChildLoop&) = delete;

  /// Runs until the main process says stop; returns the exit status.
  int run() override;

 protected:
  explicit ChildLoop(ChildSetup setup);

  /// Builds the graph (`make_root`), then continues from the checkpoint, if any, at `restored`.
  /// When restoring, the main process waits for the answer: kRestored (a RestoreAck) or kError,
  /// through replies(). Otherwise a failure is reported at the next epoch's start.
  template <class MakeRoot>
  void start(MakeRoot&& make_root, const std::vector<std::byte>* restored);

  /// Runs `root` from now on; it must yield what the child's graph yields (`expected_type_`).
  void set_root(DataPipePtr root);

  // What the roles do differently.
  /// Seeds the graph for epoch `epoch` (from 0) with `seeds`, as torchdata seeds this kind of child.
  virtual void seed(SeedGenerator& seeds, std::uint64_t epoch) = 0;
  /// Whether the role has room to produce now (the loop checks the epoch's state).
  [[nodiscard]] virtual bool has_room() = 0;
  /// Produces some elements, counting them in progress_.produced, also when the graph throws after
  /// some; sets progress_.ended at the end of the stream.
  virtual void produce() = 0;
  /// Writes a marker, the end or an error to every reader of this child's elements.
  virtual void broadcast(RecordKind kind, std::span<const std::byte> payload) = 0;
  /// The sink replies to checkpoints go through.
  [[nodiscard]] virtual RingSink& replies() = 0;
  /// Reads what must be read before the state is saved (a worker: its feed, up to the pause).
  virtual void before_checkpoint(std::uint64_t /*request*/) {}
  /// Saves and restores what the role keeps of its process beside its graph (scope
  /// checkpoint_schema::child::kProcess), such as the state of the process's random generator.
  virtual void save_process_state(StateWriter& /*process*/) const {}
  virtual void load_process_state(const StateReader& /*process*/) {}
  /// Moves what waits for room; called every round of the loop.
  virtual void flush() {}
  /// Whether a flush would make progress now.
  [[nodiscard]] virtual bool can_flush() { return false; }
  /// Called once before the child waits: wakes the readers of elements it published without a
  /// wake-up (RingSink::wake_reader_before_waiting on every sink it writes elements to). A reader
  /// that asked for more elements than it got sleeps until then, and nothing else would wake it
  /// while this child waits.
  virtual void wake_readers() = 0;
  /// Asks the readers to wake this child when what blocks it clears; clear_wakes() after the wait.
  virtual void request_wakes() = 0;
  virtual void clear_wakes() = 0;
  /// Drops what waits for room at the start of an epoch (a record partly written stays).
  virtual void drop_pending() {}

  /// Whether an epoch runs: started, not paused, not ended, not failed.
  [[nodiscard]] bool epoch_running() const noexcept {
    return progress_.active && !paused_ && !progress_.ended && !progress_.failed;
  }
  void fail(const ErrorReport& report);
  /// Runs `body`; an exception from it other than Interrupted (the main process's stop, which
  /// ends the loop) goes to `on_error` as a report naming this child.
  template <class Body, class OnError>
  void guarded(Body&& body, OnError&& on_error);
  /// guarded(body), reporting an exception to the readers with fail().
  template <class Body>
  void reporting(Body&& body) {
    guarded(std::forward<Body>(body), [this](const ErrorReport& report) { fail(report); });
  }
  /// produce(), reporting an exception with fail() as raised at the element it was producing.
  void producing();

  std::string name_;
  WorkerInfo info_;
  ChildLiveness liveness_;
  Endpoint endpoint_;
  ActivityBoard* board_;       // what this child does, for the main process's stall reports
  std::string expected_type_;  // what the child's graph yields
  DataPipePtr root_;
  std::unique_ptr<ElementEncoder> encoder_;
  ExceptionSlot* exception_;  // threads: where fail() leaves the exception; else null
  ChildProgress progress_;
  bool paused_ = false;

 private:
  /// Handles one control message; false when none is waiting.
  bool handle_control();
  void reset(std::uint64_t generation, SeedGenerator seeds, std::uint64_t epoch,
             const std::optional<GlobalEpoch>& global);
  void checkpoint(std::uint64_t request);
  [[nodiscard]] bool can_produce();
  [[nodiscard]] std::vector<std::byte> save_state() const;
  void load_state(std::span<const std::byte> bytes);
  /// Throws StateError when the restored progress_ cannot come from a checkpoint of this group.
  void check_progress() const;

  RingReader control_;
  Bell* main_bell_;
  const ElementPassing* passing_;
  WorkerResetFunction reset_fn_;
  std::optional<ErrorReport> startup_error_;
  std::uint64_t group_generation_;  // the main side's epoch when the child started
};

template <class Body, class OnError>
void ChildLoop::guarded(Body&& body, OnError&& on_error) {
  try {
    body();
  } catch (const Interrupted&) {
    throw;
  } catch (...) {
    on_error(report_current_exception(name_));
  }
}

template <class MakeRoot>
void ChildLoop::start(MakeRoot&& make_root, const std::vector<std::byte>* restored) {
  guarded(
      [&] {
        make_root();
        if (restored != nullptr) load_state(*restored);
      },
      [&](ErrorReport report) {
        // Reported after the acknowledgement of the next epoch, which the main process waits for.
        startup_error_ = std::move(report);
        progress_.active = false;
      });
  if (restored == nullptr) return;
  if (startup_error_) {
    replies().write_record(RecordKind::kError, to_bytes(*startup_error_));
  } else {
    replies().write_record(RecordKind::kRestored, to_bytes(RestoreAck{progress_.ended, progress_.failed}));
  }
}

}  // namespace dpipe::detail::transport

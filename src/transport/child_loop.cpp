// ChildLoop: the loop every child of a service built on the transport runs.

#include "child_loop.hpp"

#include <unistd.h>

#include <dpipe/core/checkpoint_schema.hpp>
#include <dpipe/core/detail/user_function.hpp>
#include <dpipe/core/element_ops.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/graph/state.hpp>

#include "transport/record_stream.hpp"

namespace dpipe::detail::transport {

void ChildLiveness::check(bool thorough) {
  if (stop_requested()) throw Interrupted{};
  // The main process died: nobody reads this child. (A thread has no parent to lose.)
  if (thorough && parent_ != 0 && getppid() != parent_) _exit(1);
}

ChildLoop::ChildLoop(ChildSetup setup)
    : name_(std::move(setup.name)),
      info_(setup.info),
      liveness_(*setup.slot, setup.parent),
      endpoint_{&setup.slot->bell, &liveness_, std::chrono::milliseconds(0), &setup.slot->board},
      board_(&setup.slot->board),
      expected_type_(std::move(setup.expected_type)),
      exception_(setup.exception),
      control_(setup.control),
      main_bell_(setup.main_bell),
      passing_(setup.passing),
      reset_fn_(std::move(setup.reset_fn)),
      group_generation_(setup.generation) {}

int ChildLoop::run() {
  try {
    for (;;) {
      while (handle_control()) {
      }
      if (liveness_.stop_requested()) return 0;
      flush();
      if (can_produce()) {
        board_->set(Activity::kRunning);
        producing();
        continue;
      }
      // Nothing to do but wait: for room when an epoch runs, else for the main process's command.
      wake_readers();
      endpoint_.wait(
          [&] {
            request_wakes();
            return control_.peek().has_value() || can_flush() || can_produce() || liveness_.stop_requested();
          },
          [] { return std::string(); }, epoch_running() ? Activity::kWaitingForRoom : Activity::kWaitingForCommand);
      clear_wakes();
    }
  } catch (const Interrupted&) {
    return 0;
  }
}

bool ChildLoop::can_produce() { return epoch_running() && has_room(); }

void ChildLoop::set_root(DataPipePtr root) {
  if (!root || root->element_type() != expected_type_) {
    DPIPE_THROW(InvalidArgument, "{}: worker_init_fn and worker_reset_fn must return an iter pipe of {}, got {}", name_,
                expected_type_, root ? root->element_type() : std::string("nothing"));
  }
  if (root == root_ && encoder_) return;
  root_ = std::move(root);
  encoder_ = passing_->encoder(root_);
}

void ChildLoop::producing() {
  detail::forget_failing_node();
  guarded([&] { produce(); },
          [this](ErrorReport report) {
            // Raised here (not relayed from the process feeding this one) at the element it was on.
            if (report.where == name_) report.element = progress_.produced;
            fail(report);
          });
}

void ChildLoop::fail(const ErrorReport& report) {
  progress_.failed = true;
  if (exception_ != nullptr) exception_->set(report.original);
  broadcast(RecordKind::kError, to_bytes(report));
}

bool ChildLoop::handle_control() {
  const auto record = control_.peek();
  if (!record) return false;
  if (record->kind != RecordKind::kControl) {
    DPIPE_THROW(Error, "dpipe internal error: a control ring holds a record of kind {}",
                static_cast<int>(record->kind));
  }
  const auto message = from_bytes<ControlMessage>(record->payload);
  if (control_.release(*record)) main_bell_->ring();
  switch (message.command) {
    case Command::kReset:
      reset(message.value, *message.seeds, message.epoch, message.global);
      break;
    case Command::kPause:
      paused_ = true;
      broadcast(RecordKind::kPaused, marker_payload(message.value));
      break;
    case Command::kResume:
      paused_ = false;
      break;
    case Command::kCheckpoint:
      checkpoint(message.value);
      break;
  }
  return true;
}

void ChildLoop::reset(std::uint64_t generation, SeedGenerator seeds, std::uint64_t epoch,
                      const std::optional<GlobalEpoch>& global) {
  progress_.start(generation);
  paused_ = false;
  drop_pending();
  broadcast(RecordKind::kResetAck, marker_payload(generation));
  if (startup_error_) {
    fail(*startup_error_);
    return;
  }
  reporting([&] {
    seed(seeds, epoch);
    if (global) graph::set_global_epoch(root_, *global);
    if (reset_fn_) set_root(reset_fn_(root_, info_, seeds));
    dynamic_cast<IterDataPipeBase&>(*root_).reset();
  });
}

void ChildLoop::checkpoint(std::uint64_t request) {
  guarded(
      [&] {
        before_checkpoint(request);
        replies().write_record(RecordKind::kState, save_state());
      },
      [&](const ErrorReport& report) { replies().write_record(RecordKind::kError, to_bytes(report)); });
}

std::vector<std::byte> ChildLoop::save_state() const {
  StateStore store;
  StateWriter process(store, std::string(checkpoint_schema::child::kProcess));
  process.write(checkpoint_schema::child::kProgress, progress_);
  save_process_state(process);
  graph::save_state(root_, StateWriter(store, std::string(checkpoint_schema::kGraph)));
  return store.to_bytes();
}

void ChildLoop::load_state(std::span<const std::byte> bytes) {
  const StateStore store = StateStore::from_bytes(bytes);
  const StateReader process(store, std::string(checkpoint_schema::child::kProcess));
  progress_ = process.read<ChildProgress>(checkpoint_schema::child::kProgress);
  check_progress();
  load_process_state(process);
  graph::load_state(root_, StateReader(store, std::string(checkpoint_schema::kGraph)));
  if (const auto unread = store.unread(""); !unread.empty()) {
    DPIPE_THROW(StateError, "the checkpoint's field {} belongs to nothing in {}", unread.front(), name_);
  }
  dynamic_cast<IterDataPipeBase&>(*root_).reset();  // continues the restored iteration
}

void ChildLoop::check_progress() const {
  // A child runs the group's epoch from its first reset on (the group resets every child before
  // it asks for a checkpoint); before that it has none. An epoch's stream ends or fails, not both.
  const ChildProgress& saved = progress_;
  const bool consistent =
      saved.active
          ? saved.generation == group_generation_ && saved.generation > 0 && !(saved.ended && saved.failed)
          : saved.generation == 0 && group_generation_ == 0 && !saved.ended && !saved.failed && saved.produced == 0;
  if (consistent) return;
  DPIPE_THROW(StateError,
              "the checkpoint's field process:progress is inconsistent: generation {}, active {}, ended {}, failed {} "
              "in a process group at generation {}",
              saved.generation, saved.active, saved.ended, saved.failed, group_generation_);
}

}  // namespace dpipe::detail::transport

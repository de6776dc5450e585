#pragma once
// What the worker and the dispatching process have in common: their liveness rules and reading
// their control ring. Private to the library.

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <sys/types.h>
#include <vector>

#include <dpipe/core/datapipe.hpp>

#include "endpoint.hpp"
#include "protocol.hpp"
#include "ring.hpp"
#include "shared_pool.hpp"

namespace dpipe::detail::mp {

/// A child stops waiting when the main process tells it to stop, and exits at once when the main
/// process is gone.
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

/// Reads the control ring of a child. Thread-safety: the child's thread.
class ControlReader {
 public:
  ControlReader(RingMemory ring, Bell& main_bell) : reader_(ring), main_bell_(&main_bell) {}
  /// The next control message, if one is waiting.
  std::optional<ControlMessage> poll();
  /// Whether a message is waiting.
  [[nodiscard]] bool pending() { return reader_.peek().has_value(); }

 private:
  RingReader reader_;
  Bell* main_bell_;
};

/// Describes the exception being handled (call inside a catch block) for the main process.
ErrorReport report_current_exception(const std::string& where);

/// Runs `body`; an exception from it other than Interrupted is described as happening in `where`
/// and handed to `on_error`.
template <class Body, class OnError>
void report_failures(const std::string& where, Body&& body, OnError&& on_error) {
  try {
    body();
  } catch (const Interrupted&) {
    throw;
  } catch (...) {
    on_error(report_current_exception(where));
  }
}

/// Where a child is in its epochs; part of its checkpoint.
struct ChildProgress {
  std::uint64_t generation = 0;  // the epoch it runs (see protocol.hpp)
  bool active = false;           // an epoch was started
  bool ended = false;            // its stream ended in this epoch
  bool failed = false;           // it reported an error in this epoch
  std::uint64_t dealt = 0;       // the dispatching process: elements dealt in this epoch
  DPIPE_FIELDS(generation, active, ended, failed, dealt)

  /// Starts epoch `next`.
  void start(std::uint64_t next) noexcept {
    generation = next;
    active = true;
    ended = failed = false;
    dealt = 0;
  }
};

/// A child's checkpoint: its progress, its random state (worker.hpp) and its graph's state.
[[nodiscard]] std::vector<std::byte> save_child(const ChildProgress& progress, const DataPipePtr& root);
/// Restores what save_child saved: sets `progress` first (a graph reading another process needs
/// its generation), then `root`'s graph, which continues the saved iteration. Throws StateError
/// when `blob` is corrupt.
void restore_child(std::span<const std::byte> blob, ChildProgress& progress, const DataPipePtr& root);

}  // namespace dpipe::detail::mp

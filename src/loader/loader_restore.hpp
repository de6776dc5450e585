#pragma once
// What LoaderCore's checkpoints and its protocol share: how a checkpoint restores the graph, and
// what load_state_dict() read. Private to the library.

#include <cstdint>

#include <dpipe/core/state.hpp>
#include <dpipe/global/global_epoch.hpp>
#include <dpipe/loader/loader_core.hpp>

namespace dpipe::detail {

/// How a checkpoint restores the graph.
enum class GraphMode : std::uint8_t {
  kNotStarted = 0,    // saved before the first iteration
  kState = 1,         // every node's state
  kReplay = 2,        // a node cannot save its state: replay the epoch from its seeds and skip
  kReplayFailed = 3,  // saved after the epoch failed: replay it like kReplay
  kGlobal = 4,        // a global-order pipeline: its global position, onto any worker count and world size
};

/// What load_state_dict read, applied at the next iteration.
struct LoaderCore::Restore {
  GraphMode mode = GraphMode::kNotStarted;
  std::uint64_t epoch = 0;
  std::uint64_t taken = 0;
  bool epoch_ended = false;
  bool paused = false;
  bool service_state = false;
  GlobalPosition global;  // kGlobal
  StateStore store;  // the graph's and the service's fields

  /// Whether the checkpoint was saved inside an epoch, which the next iteration continues.
  [[nodiscard]] bool mid_epoch() const noexcept { return mode != GraphMode::kNotStarted && !epoch_ended; }
};

}  // namespace dpipe::detail

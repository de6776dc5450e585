#pragma once
// The messages between a main side and its children (processes or threads) that run a ChildLoop:
// the children of a MultiProcessingReadingService, and of any service built on this wing. Private
// to the library.
//
// Main -> child (control ring, RecordKind::kControl): a ControlMessage.
//   kReset(generation, SeedGenerator)  start epoch `generation` with these seeds (and a global
//                                      order's GlobalEpoch, if the pipeline has one); the child answers
//                                      with kResetAck(generation) before its first element (the
//                                      dispatching process also gets the epoch's index, from 0)
//   kPause(request)                    stop after the current element; answer kPaused(request)
//   kResume                            continue
//   kCheckpoint(request)               answer kState (or kError) with the child's state; a worker
//                                      first reads its dispatcher feed up to kPaused(request)
// Stopping is a flag in the child's slot, not a message: a child blocked in a write sees it.
// Child -> its readers (a worker's data ring, a dispatching child's reply ring and the rings it
// feeds other children through): kElement, kEnd, kError(ErrorReport), kResetAck, kPaused, kState.
// A child forked to continue a checkpoint first answers kRestored(RestoreAck) or kError through
// its reply path; the main process waits for every answer before load_state_dict() returns.

#include <cstdint>
#include <optional>

#include <dpipe/global/global_epoch.hpp>
#include <dpipe/random/seed_generator.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::detail::transport {

enum class Command : std::uint8_t { kReset = 1, kPause = 2, kResume = 3, kCheckpoint = 4 };

/// A control message.
struct ControlMessage {
  Command command = Command::kResume;
  std::uint64_t value = 0;               // kReset: the generation; kPause, kCheckpoint: the request
  std::uint64_t epoch = 0;               // kReset: the epochs whose draws the seeds skip
  std::optional<SeedGenerator> seeds{};  // kReset: the child's seeds
  std::optional<GlobalEpoch> global{};   // kReset: the global order's epoch, for its sampler
  DPIPE_FIELDS(command, value, epoch, seeds, global)
};

/// A child's answer to being forked from a checkpoint: where its restored epoch stands, which the
/// main process's merge must agree with.
struct RestoreAck {
  bool ended = false;   // its stream ended in the restored epoch
  bool failed = false;  // it reported an error in the restored epoch
  DPIPE_FIELDS(ended, failed)
};

}  // namespace dpipe::detail::transport

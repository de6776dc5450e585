#pragma once
/// \file
/// The keys of a DataLoader2 checkpoint, defined once: the loader, the reading services and the
/// graph write them; DataLoader2::load_state_dict(), the services' restore() and dpipe-inspect
/// read them. A checkpoint is one StateStore (<dpipe/core/state.hpp>) of fields
/// "<scope>:<name>" (docs/checkpointing.md):
///
///     loader:<name>                       the loader's own fields (loader::k...)
///     graph/<node path>:<name>            the loader's process's nodes (graph::save_state)
///     service:<name>                      the reading service's fields
///     service/worker<w>/process:<name>    worker w's own fields (child::k...)
///     service/worker<w>/graph/...         worker w's nodes
///     service/dispatcher/...              the dispatching process's
///     service/<i>/...                     service i of a SequentialReadingService
///
/// A job's checkpoint (DataLoader2::save_job_checkpoint) is one StateStore holding every rank's
/// checkpoint under its rank's scope, and the job's world size:
///
///     job:world_size                      the ranks that saved it (job::k...)
///     rank<r>/loader:..., rank<r>/graph/...  rank r's checkpoint
///
/// Each level saves and restores with one pair of verbs: a node, a part of one and a graph
/// save_state / load_state; a reading service checkpoint / restore; the loader state_dict /
/// load_state_dict (torchdata's names).

#include <cstddef>
#include <string>
#include <string_view>

namespace dpipe::checkpoint_schema {

/// The top scopes of a loader's checkpoint, and a child process's.
inline constexpr std::string_view kLoader = "loader";
inline constexpr std::string_view kGraph = "graph";
inline constexpr std::string_view kService = "service";

/// DataLoader2's fields (scope kLoader).
namespace loader {
inline constexpr std::string_view kPipeline = "pipeline";  ///< graph::PipelineNode records
inline constexpr std::string_view kFingerprint = "fingerprint";
inline constexpr std::string_view kService = "service";  ///< ReadingServiceInterface::describe()
inline constexpr std::string_view kSeed = "seed";
inline constexpr std::string_view kResetSeed = "reset_seed";
inline constexpr std::string_view kSeeds = "seeds";
inline constexpr std::string_view kInitialSeeds = "initial_seeds";
inline constexpr std::string_view kEpoch = "epoch";
inline constexpr std::string_view kTaken = "taken";
inline constexpr std::string_view kEpochEnded = "epoch_ended";
inline constexpr std::string_view kPaused = "paused";
inline constexpr std::string_view kMode = "mode";
inline constexpr std::string_view kServiceState = "service_state";
/// The elements the iterator read from the pipeline and had not handed out (only when some were).
inline constexpr std::string_view kReadAhead = "read_ahead";
/// A global-order pipeline (mode "global position"): the first global step not wholly delivered,
/// and how many elements of it were (docs/determinism.md).
inline constexpr std::string_view kGlobalStep = "global_step";
inline constexpr std::string_view kGlobalOffset = "global_offset";
}  // namespace loader

/// MultiProcessingReadingService's fields (the scope its loader gives it).
namespace workers {
inline constexpr std::string_view kWorkers = "workers";
inline constexpr std::string_view kStarted = "started";
inline constexpr std::string_view kGeneration = "generation";
inline constexpr std::string_view kDispatcher = "dispatcher";  ///< the dispatching process's sub-scope
/// Worker `w`'s sub-scope: "worker<w>".
[[nodiscard]] inline std::string worker(std::size_t w) { return "worker" + std::to_string(w); }
}  // namespace workers

/// A worker or dispatching process's own fields (scope kProcess of the child's scope); its nodes
/// are under kGraph.
namespace child {
inline constexpr std::string_view kProcess = "process";
inline constexpr std::string_view kProgress = "progress";
inline constexpr std::string_view kRandom = "random";
}  // namespace child

/// DistributedReadingService's fields.
namespace ranks {
inline constexpr std::string_view kRank = "rank";
inline constexpr std::string_view kWorldSize = "world_size";
inline constexpr std::string_view kEpochs = "epochs";
}  // namespace ranks

/// A job's checkpoint's own fields (scope kScope); rank r's checkpoint is under rank(r).
namespace job {
inline constexpr std::string_view kScope = "job";
inline constexpr std::string_view kWorldSize = "world_size";
/// Rank `r`'s scope: "rank<r>".
[[nodiscard]] inline std::string rank(std::size_t r) { return "rank" + std::to_string(r); }
}  // namespace job

/// SequentialReadingService's fields; service i writes under the sub-scope "<i>".
namespace sequence {
inline constexpr std::string_view kServices = "services";
}  // namespace sequence

}  // namespace dpipe::checkpoint_schema

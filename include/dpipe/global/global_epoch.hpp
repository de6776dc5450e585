#pragma once
/// \file
/// The global order's protocol between the loader, the reading services and the nodes: what an
/// epoch of the global order is (GlobalEpoch), where the global stream stands (GlobalPosition),
/// the interfaces of the nodes that take part, and the graph functions that reach them.
/// See docs/determinism.md.

#include <cstdint>
#include <optional>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe {

class GlobalSchedule;

/// What every instance of a global-order pipeline must agree on for an epoch.
struct GlobalEpoch {
  std::uint64_t key = 0;         ///< keys the epoch's permutation and the per-sample seeds
  std::uint64_t start_step = 0;  ///< the first global step of this run of the epoch (a restore's)
  bool user_seeded = false;      ///< the key comes from DataLoader2::seed(): the same on every rank
  std::uint64_t world = 1;       ///< the ranks of the job (a distributed reading service sets it)
  DPIPE_FIELDS(key, start_step, user_seeded, world)
};

/// Where a global stream stands: every step before `step` is delivered, and the first `offset`
/// elements of `step`.
struct GlobalPosition {
  std::uint64_t step = 0;
  std::uint64_t offset = 0;
};

/// A node of a global-order pipeline that follows the epoch's GlobalEpoch.
/// Thread-safety: called while nothing iterates the graph.
class GlobalOrderNode {
 public:
  virtual ~GlobalOrderNode() = default;
  /// The epoch the next iteration runs.
  virtual void set_global_epoch(const GlobalEpoch& epoch) = 0;
  /// What set_global_epoch() set last, if anything.
  [[nodiscard]] virtual std::optional<GlobalEpoch> global_epoch() const = 0;
};

/// The sampler at the start of a global-order pipeline: it deals the epoch's steps to the
/// instances and reads the source in the epoch's order.
class GlobalOrderSource : public GlobalOrderNode {
 public:
  /// The steps of this instance, as the sampler's sharding and epoch stand now.
  [[nodiscard]] virtual GlobalSchedule schedule() const = 0;
  /// Each step spans `span` positions; `drop_last` drops a short last step. Set once, by the
  /// batch() of the global pipe; another span is an InvalidArgument.
  virtual void set_step(std::uint64_t span, bool drop_last) = 0;
};

/// The end of a global-order pipeline, in the trainer's process: it yields the global stream
/// (this rank's steps of it) and knows where it stands.
class GlobalOrderEnd : public GlobalOrderNode {
 public:
  /// Where the global stream stands once the first `handed_out` elements this node yielded in
  /// the epoch have reached the trainer (the rest were read ahead). StateError when `handed_out`
  /// is further behind than the node remembers.
  [[nodiscard]] virtual GlobalPosition position_after(std::uint64_t handed_out) const = 0;
  /// The next iteration continues the epoch at `position`, the trainer having had `handed_out`
  /// elements of it.
  virtual void resume_at(GlobalPosition position, std::uint64_t handed_out) = 0;
};

namespace graph {

/// Sets `epoch` on every GlobalOrderNode reachable from `root`.
void set_global_epoch(const DataPipePtr& root, const GlobalEpoch& epoch);
/// The epoch set on the first GlobalOrderNode reachable from `root` (the end, for a graph a reading
/// service split), if any.
[[nodiscard]] std::optional<GlobalEpoch> find_global_epoch(const DataPipePtr& root);
/// The GlobalOrderEnd reachable from `root`, or null.
[[nodiscard]] GlobalOrderEnd* find_global_end(const DataPipePtr& root);

}  // namespace graph
}  // namespace dpipe

#pragma once
/// \file
/// FusedRun: consecutive element-wise nodes (map, filter), optionally fed by a range source, pulled
/// as one loop over the elements instead of one pass per node. The graph still holds every node
/// (graph functions, statistics and checkpoints see them as they are); the last node of the run
/// owns a FusedRun and pulls through it whenever the run still holds (see fusion.hpp).

#include <cstddef>
#include <limits>
#include <memory>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>

namespace dpipe::detail {

/// The stages of a run, in the static type of its handle (ElementwisePipe).
template <class F>
struct MapStage {};
template <class G>
struct FilterStage {};

/// Thread-safety: as the owning node's.
template <class U>
class FusedRun {
 public:
  virtual ~FusedRun() = default;
  /// A copy for a clone of the owning node (nothing bound).
  [[nodiscard]] virtual std::unique_ptr<FusedRun> clone() const = 0;
  /// What pull() returns when the run does not hold now.
  static constexpr std::size_t kNotHeld = std::numeric_limits<std::size_t>::max();

  /// Pulls up to `n` elements for `last`, the owning node, through the whole run, and returns how
  /// many; kNotHeld when the run does not hold now (a node of it was replaced, counts statistics,
  /// or holds elements read ahead by its own pull), and the node then pulls on its own. (A plain
  /// count, not an optional: an optional comes back through memory, and reading it stalls.)
  virtual std::size_t pull(IterDataPipeBase& last, std::vector<U>& out, std::size_t n) = 0;
};

/// The FusedRun of a run fed by `Head` (a range source node, or void for any other node) whose
/// first stage reads elements of type `In`; `kMaySkip` when a stage's error policy may skip.
template <class Head, class In, bool kMaySkip, class... Stages>
class FusedRunOf;

/// Copies a node's FusedRun for its clone.
template <class U>
std::unique_ptr<FusedRun<U>> clone_run(const std::unique_ptr<FusedRun<U>>& run) {
  return run ? run->clone() : nullptr;
}

}  // namespace dpipe::detail

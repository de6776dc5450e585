#pragma once
/// \file
/// Adapters (torchdata's dataloader2.adapter): rewrite a graph once, when DataLoader2 is built.
/// `Shuffle(enable)` switches every shuffling node on or off, and appends a shuffle when asked to
/// shuffle a graph that has none (ops::AppendShuffle, which DataLoader2<T> registers for its
/// element type). Write your own by deriving from Adapter; operations that need the element type
/// go through <dpipe/core/typed_op.hpp>.
///
/// torchdata's CacheTimeout sets the timeout of end_caching nodes (on-disk caches); dpipe has no
/// on-disk cache node, so there is no CacheTimeout adapter.

#include <memory>
#include <optional>

#include <dpipe/core/datapipe.hpp>

namespace dpipe {

/// Rewrites a graph; returns the new root. Thread-safety: called by DataLoader2's constructor.
class Adapter {
 public:
  virtual ~Adapter() = default;
  virtual DataPipePtr operator()(DataPipePtr root) = 0;
};

using AdapterPtr = std::shared_ptr<Adapter>;

/// torchdata's Shuffle adapter. std::nullopt leaves the graph alone; true or false calls
/// set_shuffle on every shuffling node; true on a graph without one appends a shuffle (with
/// torchdata's warning).
class Shuffle final : public Adapter {
 public:
  explicit Shuffle(std::optional<bool> enable = true) : enable_(enable) {}
  DataPipePtr operator()(DataPipePtr root) override;

 private:
  std::optional<bool> enable_;
};

}  // namespace dpipe

#pragma once
/// \file
/// The typed operations (<dpipe/core/typed_op.hpp>) that reading services and adapters apply to
/// a loader's root: they append a node to an erased iter root. DataLoader2<T> registers them for
/// its element type T, built with append_node (<dpipe/core/iter_pipe.hpp>), only when its service
/// or adapters may use them.

#include <chrono>
#include <cstddef>
#include <string_view>

#include <dpipe/core/datapipe.hpp>

namespace dpipe::ops {

/// `node.prefetch(buffer_size)` on an erased iter node (InProcessReadingService's prefetch_cnt).
struct AppendPrefetch {
  using Function = DataPipePtr(const DataPipePtr& node, std::size_t buffer_size);
  static constexpr std::string_view kOperation = "prefetch";
};

/// `node.shuffle(buffer_size)` on an erased iter node (the Shuffle adapter appends one).
struct AppendShuffle {
  using Function = DataPipePtr(const DataPipePtr& node, std::size_t buffer_size);
  static constexpr std::string_view kOperation = "shuffle";
};

/// `node.fullsync(timeout)` on an erased iter node (DistributedReadingService appends one).
struct AppendFullSync {
  using Function = DataPipePtr(const DataPipePtr& node, std::chrono::milliseconds timeout);
  static constexpr std::string_view kOperation = "fullsync";
};

}  // namespace dpipe::ops

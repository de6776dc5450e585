// The Shuffle adapter.

#include <dpipe/adapter.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/core/root_ops.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/graph/settings.hpp>

namespace dpipe {

DataPipePtr Shuffle::operator()(DataPipePtr root) {
  if (!enable_) return root;
  if (graph::apply_shuffle_settings(root, *enable_) == 0 && *enable_) {
    log_warning(
        "`shuffle=True` was set, but the datapipe does not contain a `Shuffler`. Adding one at the end. Be aware that "
        "the default buffer size might not be sufficient for your task.");
    return apply_typed_op<ops::AppendShuffle>(root, 10000);
  }
  return root;
}

}  // namespace dpipe

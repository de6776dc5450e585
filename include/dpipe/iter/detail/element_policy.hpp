#pragma once
/// \file
/// ElementPolicy: the OnError policy of the nodes that call a user function on each element (map,
/// collate, filter, flatmap) and its bookkeeping for one epoch.

#include <cstdint>
#include <utility>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/detail/element_skipper.hpp>
#include <dpipe/core/detail/user_function.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/state.hpp>

namespace dpipe::detail {

/// A node's OnError policy with, under OnError::skip(), the index in the epoch of the next input
/// element and the skip count: the node's checkpoint fields "index" and "skipped". Under
/// OnError::raise() the node calls its function directly (the exception leaves as it is) and
/// keeps nothing here. Thread-safety: none (the node's).
class ElementPolicy {
 public:
  explicit ElementPolicy(OnError policy) noexcept : skipper_(policy) {}

  [[nodiscard]] const OnError& policy() const noexcept { return skipper_.policy(); }
  [[nodiscard]] bool skips() const noexcept { return policy().skips(); }

  /// Runs `apply`, which applies `node`'s function to the epoch's next input element, and returns
  /// true. When it throws, logs the element as skipped and counts it, and returns false (the node
  /// then counts it in its statistics), or throws ElementError, nesting the exception, when the
  /// budget is spent. REQUIRES: skips().
  template <class Apply>
  bool attempt(const DataPipe& node, Apply&& apply) {
    try {
      std::forward<Apply>(apply)();
    } catch (...) {
      // An ElementError past the budget leaves noted as the node's, as an exception of fn would.
      call_user_function(node, [&] { skipper_.skip_current_or_throw(node, index_++); });
      return false;
    }
    ++index_;
    return true;
  }

  /// A new epoch: no element seen, nothing skipped.
  void reset() noexcept {
    index_ = 0;
    skipper_.reset();
  }

  /// Writes the fields "index" and "skipped".
  void save_state(StateWriter& writer) const {
    writer.write("index", index_);
    skipper_.save_state(writer);
  }
  /// Reads what save_state() wrote; StateError when the count is over the budget.
  void load_state(const StateReader& reader) {
    index_ = reader.read<std::uint64_t>("index");
    skipper_.load_state(reader);
  }

 private:
  ElementSkipper skipper_;
  std::uint64_t index_ = 0;  // input elements of this epoch the function was applied to
};

}  // namespace dpipe::detail

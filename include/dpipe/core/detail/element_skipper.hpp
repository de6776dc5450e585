#pragma once
/// \file
/// ElementSkipper: the bookkeeping of a node whose OnError policy skips failed elements.

#include <cstdint>
#include <string>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/state.hpp>

namespace dpipe {
class DataError;
}  // namespace dpipe

namespace dpipe::detail {

/// Counts a node's failed elements of one epoch against its policy. Its count is part of the
/// node's checkpoint state, so a restored epoch keeps its budget. Thread-safety: none.
class ElementSkipper {
 public:
  explicit ElementSkipper(OnError policy) noexcept : policy_(policy) {}

  /// `node`'s function threw on element `index` of the epoch (counting from 0), as `description`
  /// says ("std::runtime_error: bad sample"). Logs a warning and counts the element, or throws
  /// ElementError when the policy raises or the budget is spent; called in a catch block, the
  /// ElementError nests the exception being handled.
  void skip_or_throw(const DataPipe& node, std::uint64_t index, const std::string& description);

  /// Like skip_or_throw, describing the exception being handled. Call it in a catch block.
  void skip_current_or_throw(const DataPipe& node, std::uint64_t index);

  /// An I/O node met bad data (its message names the node, the file and where): rethrows `error`
  /// itself when the policy raises; otherwise logs it and counts it, or throws ElementError when
  /// the budget is spent. Call it in the catch block of `error`.
  void skip_bad_data(const DataError& error);

  /// The elements skipped in this epoch.
  [[nodiscard]] std::uint64_t skipped() const noexcept { return skipped_; }
  [[nodiscard]] const OnError& policy() const noexcept { return policy_; }

  /// A new epoch: nothing skipped.
  void reset() noexcept { skipped_ = 0; }

  void save_state(StateWriter& writer) const { writer.write("skipped", skipped_); }
  void load_state(const StateReader& reader);

 private:
  /// Counts `failure` as skipped and logs it, or throws ElementError past the budget.
  void count_or_throw(const std::string& failure);

  OnError policy_;
  std::uint64_t skipped_ = 0;
};

}  // namespace dpipe::detail

#pragma once
/// \file
/// OnError: what `map`, `filter`, `flatmap`, `collate` and `threadpool_map` do when the user's
/// function throws on an element: raise (the default), or skip the element, log it and count it,
/// with an optional budget after which the next failure raises.

#include <cstdint>
#include <optional>

namespace dpipe {

/// An error policy for a node that calls a user function on each element. Thread-safety: a value.
struct OnError {
  enum class Action : std::uint8_t {
    kRaise,  ///< the exception leaves the node: it ends the epoch (the default)
    kSkip,   ///< the element is dropped, logged as a warning with the exception, and counted
  };
  Action action = Action::kRaise;
  /// With kSkip, how many elements the node may skip in one epoch; the next failure raises
  /// ElementError. std::nullopt: no limit. With worker processes each worker's copy of the node
  /// counts its own share.
  std::optional<std::uint64_t> budget;

  /// The exception ends the epoch.
  [[nodiscard]] static constexpr OnError raise() noexcept { return {}; }
  /// The element is skipped; more than `budget` skips in one epoch raise.
  [[nodiscard]] static constexpr OnError skip(std::optional<std::uint64_t> budget = std::nullopt) noexcept {
    return {Action::kSkip, budget};
  }
  [[nodiscard]] constexpr bool skips() const noexcept { return action == Action::kSkip; }
};

}  // namespace dpipe

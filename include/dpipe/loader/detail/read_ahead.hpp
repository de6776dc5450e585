#pragma once
/// \file
/// ReadAhead: how many elements DataLoader2's iterator reads from its pipeline at a time.
/// Internal to the loader.

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace dpipe::detail {

/// How many elements DataLoader2's iterator reads from the pipeline at a time. Small elements
/// that are quick to make are read in runs (one bulk pull() of up to kMaxRun elements), so that
/// the loader's checks and counts run once per run instead of once per element; the elements of a
/// run not yet handed out are part of the loader's checkpoint. An element that is slow to make (a
/// run would take more than kRunTime) or large (a run would hold more than kRunBytes) is read on
/// its own, as is every element of a type without a Serializer (a checkpoint could not hold it).
/// The length adapts to what timed runs measured: it doubles while runs stay within both bounds
/// and drops at once when they do not. Thread-safety: the loader's thread.
class ReadAhead {
 public:
  static constexpr std::size_t kMaxRun = 256;
  static constexpr std::chrono::nanoseconds kRunTime{20'000};
  static constexpr std::uint64_t kRunBytes = std::uint64_t{64} << 10;
  /// At the longest run, one run in this many is timed, to notice elements that got slower.
  static constexpr std::uint32_t kRetimeEvery = 16;

  /// `allowed`: whether elements may be read ahead at all.
  explicit ReadAhead(bool allowed) noexcept : allowed_(allowed) {}

  /// The length of the next run.
  [[nodiscard]] std::size_t length() const noexcept { return length_; }
  /// Whether the next run is timed (a clock read before and after it).
  [[nodiscard]] bool timed() const noexcept { return allowed_ && (growing_ || untimed_ + 1 >= kRetimeEvery); }
  /// A timed run of `count` elements took `took`, and its first element holds about `bytes`.
  void ran(std::size_t count, std::chrono::nanoseconds took, std::uint64_t bytes) noexcept;
  /// A run that was not timed.
  void ran_untimed() noexcept { ++untimed_; }

 private:
  bool allowed_;
  bool growing_ = true;
  std::uint32_t untimed_ = 0;
  std::size_t length_ = 1;
};

}  // namespace dpipe::detail

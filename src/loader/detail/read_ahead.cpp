// ReadAhead: the length of DataLoader2's runs.

#include <algorithm>

#include <dpipe/loader/detail/read_ahead.hpp>

namespace dpipe::detail {

void ReadAhead::ran(std::size_t count, std::chrono::nanoseconds took, std::uint64_t bytes) noexcept {
  untimed_ = 0;
  // The longest run within both bounds, at what this run's elements cost each.
  const auto per_element = std::max<std::int64_t>(1, took.count() / static_cast<std::int64_t>(count));
  std::size_t fits = kMaxRun;
  fits = std::min(fits, static_cast<std::size_t>(kRunTime.count() / per_element));
  fits = std::min(fits, static_cast<std::size_t>(kRunBytes / std::max<std::uint64_t>(1, bytes)));
  fits = std::max<std::size_t>(fits, 1);
  growing_ = fits > length_;
  length_ = growing_ ? std::min(fits, 2 * length_) : fits;
}

}  // namespace dpipe::detail

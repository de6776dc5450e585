#pragma once
// The size classes of dpipe's host memory pools (the recycling pool, a worker's tensor arena).
// Private to the library.

#include <bit>
#include <cstddef>
#include <limits>
#include <new>

namespace dpipe::detail {

/// The size class of `bytes`: a multiple of 64 up to 4 KiB, above it a multiple of an eighth of
/// the largest power of two not above `bytes` (so at most 1/8 more than asked for). Throws
/// std::bad_alloc for a size no class holds.
[[nodiscard]] inline std::size_t size_class(std::size_t bytes) {
  if (bytes <= 4096) return (bytes + 63) / 64 * 64;
  if (bytes > std::numeric_limits<std::size_t>::max() / 2) throw std::bad_alloc();
  const std::size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

}  // namespace dpipe::detail

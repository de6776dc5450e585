#pragma once
/// \file
/// The tag that makes a text reader yield blocks of consecutive units of one file in one buffer
/// instead of one owning element per unit: `io::readlines(options, io::in_blocks(1024))` yields
/// io::LineBlocks, `io::parse_csv(options, io::in_blocks(1024))` io::CsvBlocks.

#include <cstddef>

namespace dpipe::io {

/// Tag: the node yields blocks of up to `units` lines or rows (io::in_blocks(n)).
struct InBlocks {
  std::size_t units;
};

/// Blocks of up to `units` (> 0) lines or rows each.
[[nodiscard]] constexpr InBlocks in_blocks(std::size_t units) noexcept { return {units}; }

}  // namespace dpipe::io

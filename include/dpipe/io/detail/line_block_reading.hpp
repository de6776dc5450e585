#pragma once
/// \file
/// read_line_block(): how the block readers (readlines and parse_jsonl with io::in_blocks) fill a
/// LineBlock from a LineCursor.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <dpipe/core/error.hpp>
#include <dpipe/io/detail/line_cursor.hpp>
#include <dpipe/io/line_block.hpp>

namespace dpipe::io::detail {

/// How a block is read.
struct LineBlockRules {
  std::size_t max_lines;    // > 0
  std::size_t padding = 0;  // bytes the block's buffer must have room for behind its end
};

/// Reads the next up to `rules.max_lines` lines of the file `cursor` reads into a LineBlock;
/// std::nullopt at the end of the file. A DataError reading the first line leaves; one after it
/// (an overlong line, a read error) ends the block early, so that its lines stay consecutive:
/// `skip(error)` is called in its catch block (the node's skip_bad_data, which rethrows under the
/// raise policy, losing the lines read). The buffer reserves `bytes_hint` bytes and
/// `rules.padding` more, and ends with at least `rules.padding` bytes of capacity to spare;
/// `bytes_hint` becomes its size. For each piece of lines copied in one go, `on_piece(first,
/// delta)` says that the file offset of block line `first` and those after it (up to the next
/// piece) is their span's begin + delta.
template <class Skip, class OnPiece>
std::optional<LineBlock> read_line_block(LineCursor& cursor, std::string_view node, LineBlockRules rules,
                                         std::size_t& bytes_hint, Skip&& skip, OnPiece&& on_piece) {
  /// A block reserves room for at most this many lines up front (blocks of a million lines grow).
  constexpr std::size_t kMaxReservedLines = 4096;
  const auto first = cursor.next(node);
  if (!first) return std::nullopt;
  LineBlock block(cursor.path(), cursor.line());
  block.reserve(std::min(rules.max_lines, kMaxReservedLines), bytes_hint + rules.padding);
  const auto piece_added = [&](std::size_t piece_first) {
    on_piece(piece_first,
             static_cast<std::int64_t>(cursor.line_offset()) - static_cast<std::int64_t>(block.spans().back().begin));
  };
  block.append(*first);
  piece_added(0);
  std::array<std::string_view, 64> run;
  try {
    while (block.size() < rules.max_lines) {
      const std::size_t before = block.size();
      const std::size_t wanted = std::min(run.size(), rules.max_lines - before);
      if (const std::size_t got = cursor.next_buffered({run.data(), wanted}); got > 0) {
        block.append_run({run.data(), got});
        piece_added(before);
        continue;
      }
      const auto line = cursor.next(node);  // reads on, or a line the fast path leaves
      if (!line) break;
      block.append(*line);
      piece_added(before);
    }
  } catch (const DataError& error) {
    skip(error);
  }
  bytes_hint = block.buffer().size();
  if (block.buffer().capacity() - block.buffer().size() < rules.padding)
    block.reserve(block.size(), block.buffer().size() + rules.padding);
  return block;
}

}  // namespace dpipe::io::detail

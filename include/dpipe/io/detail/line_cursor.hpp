#pragma once
/// \file
/// LineCursor: the part of readlines() that does not depend on what it yields.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <dpipe/io/file_cursor.hpp>

namespace dpipe::io::detail {

/// How lines are read.
struct LineRules {
  std::size_t skip_lines = 0;
  bool strip_newline = true;
  std::size_t max_line_bytes = 0;
};

/// Reads the lines of one file at a time, in blocks, and knows where the next line starts, so
/// that a checkpoint reopens the file there (FileCursor; its count is the lines read, skipped
/// ones included). Thread-safety: one thread.
class LineCursor final : public FileCursor {
 public:
  explicit LineCursor(LineRules rules) : rules_(rules) {}

  /// The number of the line next() returned last (from 1, skipped lines included), while reading().
  [[nodiscard]] std::uint64_t line() const noexcept { return count_; }
  /// The byte offset where the line next() returned last starts, while reading().
  [[nodiscard]] std::uint64_t line_offset() const noexcept { return line_offset_; }

  /// The next line of the current file, valid until the next call; std::nullopt at its end, and
  /// the file is closed. A read error is a DataError naming `node` (the file is closed); a line
  /// longer than the limit is a DataError too, after the cursor moved past that line (the next
  /// call reads the line after it).
  std::optional<std::string_view> next(std::string_view node);

  /// The fast path of next() for a run of lines: stores up to lines.size() lines that are already
  /// in the buffer in `lines`, as next() would return them, valid until the next call of either,
  /// and returns how many. It stops early at a line next() must handle (one that runs past the
  /// buffer, an overlong one, a header line to skip, "\r\n" kept as "\n"); it never reads.
  std::size_t next_buffered(std::span<std::string_view> lines) noexcept;

 private:
  /// Reads more of the file behind what is buffered; false at its end.
  bool fill(std::string_view node);
  /// Finds the end of the current line; returns its length (without the '\n') and whether it ended
  /// with one, reading more as needed; std::nullopt at the end of the file.
  std::optional<std::pair<std::size_t, bool>> find_line(std::string_view node);
  /// Skips past the rest of an overlong line and throws its DataError.
  [[noreturn]] void reject_long_line(std::uint64_t offset, std::string_view node);

  LineRules rules_;
  /// Where the line next() returned last starts.
  std::uint64_t line_offset_ = 0;
  /// A line next() returned that is not in the buffer as it is: "\r\n" kept as "\n".
  std::string rewritten_;
};

}  // namespace dpipe::io::detail

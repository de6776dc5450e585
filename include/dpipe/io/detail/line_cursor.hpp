#pragma once
/// \file
/// LineCursor: the part of readlines() that does not depend on what it yields.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <dpipe/io/detail/file_cursor.hpp>

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

  /// The number of the line next() stored last (from 1, skipped lines included), while reading().
  [[nodiscard]] std::uint64_t line() const noexcept { return count_; }
  /// The byte offset where the line next() stored last starts, while reading().
  [[nodiscard]] std::uint64_t line_offset() const noexcept { return line_offset_; }

  /// Stores the next line of the current file in `line`; false at its end, and the file is closed.
  /// A read error is a DataError naming `node` (the file is closed); a line longer than the limit
  /// is a DataError too, after the cursor moved past that line (the next call reads the line after
  /// it).
  bool next(std::string& line, std::string_view node);

 private:
  /// Reads more of the file behind what is buffered; false at its end.
  bool fill(std::string_view node);
  /// Finds the end of the current line; returns its length (without the '\n') and whether it ended
  /// with one, reading more as needed; std::nullopt at the end of the file.
  std::optional<std::pair<std::size_t, bool>> find_line(std::string_view node);
  /// Skips past the rest of an overlong line and throws its DataError.
  [[noreturn]] void reject_long_line(std::uint64_t offset, std::string_view node);

  LineRules rules_;
  /// Where the line next() stored last starts.
  std::uint64_t line_offset_ = 0;
};

}  // namespace dpipe::io::detail

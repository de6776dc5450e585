#pragma once
/// \file
/// LineCursor: the part of readlines() that does not depend on what it yields.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/core/state.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io::detail {

/// How lines are read.
struct LineRules {
  std::size_t skip_lines = 0;
  bool strip_newline = true;
  std::size_t max_line_bytes = 0;
};

/// Reads the lines of one file at a time, in blocks, and knows where the next line starts, so
/// that a checkpoint reopens the file there. Thread-safety: one thread.
class LineCursor {
 public:
  explicit LineCursor(LineRules rules) : rules_(rules) {}
  LineCursor(const LineCursor& other) : rules_(other.rules_) {}  // a copy reads no file
  LineCursor& operator=(const LineCursor&) = delete;

  /// Whether a file is being read.
  [[nodiscard]] bool reading() const noexcept { return file_.has_value(); }
  /// The path of the file being read (while reading()).
  [[nodiscard]] const std::string& path() const noexcept { return file_->path(); }
  /// The number of the line next() stored last (from 1, skipped lines included), while reading().
  [[nodiscard]] std::uint64_t line() const noexcept { return line_; }
  /// The byte offset where the line next() stored last starts, while reading().
  [[nodiscard]] std::uint64_t line_offset() const noexcept { return line_offset_; }
  /// Starts reading `file` from its current offset, as its line 1.
  void start(OpenedFile file);
  /// Stops reading the current file.
  void close() noexcept;

  /// Stores the next line of the current file in `line`; false at its end, and the file is closed.
  /// A read error is a DataError naming `node` (the file is closed); a line longer than the limit
  /// is a DataError too, after the cursor moved past that line (the next call reads the line after
  /// it).
  bool next(std::string& line, std::string_view node);

  /// The file, the offset of its next line and the lines read ("file", "offset", "line").
  void save(StateWriter& writer) const;
  /// Reopens the saved file at the saved offset; StateError naming `node` when it cannot.
  void load(const StateReader& reader, std::string_view node);

 private:
  /// Reads more of the file behind what is buffered; false at its end. A read error closes the
  /// file before its DataError leaves.
  bool fill(std::string_view node);
  /// Finds the end of the current line; returns its length (without the '\n') and whether it ended
  /// with one, reading more as needed; std::nullopt at the end of the file.
  std::optional<std::pair<std::size_t, bool>> find_line(std::string_view node);
  /// Skips past the rest of an overlong line and throws its DataError.
  [[noreturn]] void reject_long_line(std::uint64_t offset, std::string_view node);
  /// The offset of the first byte not consumed.
  [[nodiscard]] std::uint64_t next_offset() const noexcept { return file_->offset() - (end_ - begin_); }

  LineRules rules_;
  std::optional<OpenedFile> file_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;   // the first byte of buffer_ not consumed
  std::size_t end_ = 0;     // the end of what buffer_ holds
  bool at_end_ = false;     // the file has no bytes beyond end_
  std::uint64_t line_ = 0;  // lines consumed from the current file, skipped ones included
  /// Where the line next() stored last starts.
  std::uint64_t line_offset_ = 0;
};

}  // namespace dpipe::io::detail

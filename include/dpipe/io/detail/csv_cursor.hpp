#pragma once
/// \file
/// CsvCursor: the part of parse_csv() and parse_csv_as_dict() that turns the bytes of one file
/// into rows of fields, whatever the nodes make of the rows.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/io/csv_block.hpp>
#include <dpipe/io/file_cursor.hpp>

namespace dpipe::io::detail {

/// How rows are read: Python's csv "excel" dialect with a choice of delimiter and quote.
struct CsvRules {
  char delimiter = ',';
  char quotechar = '"';
  std::size_t skip_lines = 0;
  std::size_t max_row_bytes = 0;
};

/// Three bytes a scan for the end of a run of field bytes stops at, as a table indexed by the byte
/// and as the bytes.
struct CsvStops {
  std::array<bool, 256> table{};
  std::array<char, 3> bytes{};
};

/// Where CsvCursor::next() puts the fields of a row: a vector of strings, cleared first. Once a
/// row is known to be too long it is dropped and read to its end without being kept.
class CsvFieldsSink {
 public:
  explicit CsvFieldsSink(std::vector<std::string>& fields) noexcept : fields_(fields) { fields_.clear(); }
  void reserve(std::size_t fields) {
    if (fields_.capacity() < fields) fields_.reserve(fields);
  }
  void new_field() {
    if (!discarding_) fields_.emplace_back();
  }
  void append(const char* from, const char* to) {
    if (!discarding_) fields_.back().append(from, static_cast<std::size_t>(to - from));  // not replace()
  }
  void append(char c) {
    if (!discarding_) fields_.back().push_back(c);
  }
  void discard() {
    discarding_ = true;
    fields_.clear();
    fields_.shrink_to_fit();
  }
  [[nodiscard]] bool discarding() const noexcept { return discarding_; }
  [[nodiscard]] std::size_t size() const noexcept { return fields_.size(); }

 private:
  std::vector<std::string>& fields_;
  bool discarding_ = false;
};

/// Where CsvCursor::next() puts the fields of a row at the end of a CsvBlock: the row is the
/// block's once commit()ed, and taken back when the sink goes without (a bad row, no row).
class CsvBlockSink {
 public:
  explicit CsvBlockSink(CsvBlock& block) noexcept
      : block_(block), bytes_(block.buffer_.size()), fields_(block.field_ends_.size()) {}
  CsvBlockSink(const CsvBlockSink&) = delete;
  CsvBlockSink& operator=(const CsvBlockSink&) = delete;
  ~CsvBlockSink() {
    if (!committed_) take_back();
  }
  void reserve(std::size_t /*fields*/) noexcept {}
  void new_field() {
    if (!discarding_) block_.field_ends_.push_back(block_.buffer_.size());
  }
  void append(const char* from, const char* to) {
    if (discarding_) return;
    block_.buffer_.append(from, static_cast<std::size_t>(to - from));
    block_.field_ends_.back() = block_.buffer_.size();
  }
  void append(char c) {
    if (discarding_) return;
    block_.buffer_.push_back(c);
    block_.field_ends_.back() = block_.buffer_.size();
  }
  void discard() {
    discarding_ = true;
    take_back();
  }
  [[nodiscard]] bool discarding() const noexcept { return discarding_; }
  [[nodiscard]] std::size_t size() const noexcept { return block_.field_ends_.size() - fields_; }
  /// The row, which starts on line `line`, is complete: it becomes the block's last.
  void commit(std::uint64_t line) {
    if (block_.row_ends_.empty()) block_.first_line_ = line;
    block_.row_ends_.push_back(block_.field_ends_.size());
    committed_ = true;
  }

 private:
  void take_back() noexcept {
    block_.buffer_.resize(bytes_);
    block_.field_ends_.resize(fields_);
  }

  CsvBlock& block_;
  std::size_t bytes_;   // the block's buffer before this row
  std::size_t fields_;  // its fields before this row
  bool discarding_ = false;
  bool committed_ = false;
};

/// Reads the rows of one file at a time, in 64 KiB blocks, and knows where the next row starts,
/// so that a checkpoint reopens the file there. A row ends at "\n", "\r\n" or "\r" outside quotes;
/// a quoted field holds delimiters, line ends and doubled quotes; a quote inside an unquoted
/// field, or text after a closing quote, is kept literally (Python's non-strict rule). A blank
/// line is a row of no fields. Thread-safety: one thread.
class CsvCursor final : public FileCursor {
 public:
  explicit CsvCursor(CsvRules rules);

  /// Starts reading `file` from its current offset, as its line 1; the first skip_lines lines are
  /// skipped by the first next().
  void start(OpenedFile file);

  /// Stores the fields of the next row of the current file in `row` (a CsvFieldsSink or a
  /// CsvBlockSink: explicit instantiations in the library); false at
  /// its end, and the file is closed. DataError naming `node` on a read error and on a file that
  /// ends inside a quoted field (the file is closed), and on a row longer than max_row_bytes (the
  /// cursor moved past that row: the next call reads the row after it).
  template <class Sink>
  bool next(Sink& row, std::string_view node);
  /// next() into a vector of strings.
  bool next(std::vector<std::string>& fields, std::string_view node) {
    CsvFieldsSink sink(fields);
    return next(sink, node);
  }

  /// The 1-based line where the row next() returned last starts.
  [[nodiscard]] std::uint64_t row_line() const noexcept { return row_line_; }
  /// The byte offset where the row next() returned last starts.
  [[nodiscard]] std::uint64_t row_offset() const noexcept { return row_offset_; }

  /// Reopens the saved file at the saved offset (FileCursor::load), after its skipped lines.
  void load_state(const StateReader& reader, std::string_view node);

 private:
  /// Reads the next block once the buffer is consumed; false at the end of the file.
  bool fill(std::string_view node);
  /// Skips the first skip_lines lines of the file.
  void skip_lines(std::string_view node);
  /// Moves past the line end at buffer_[at] ('\n' or '\r', with a '\n' after a '\r').
  void consume_line_end(std::size_t at, std::string_view node);
  /// The DataError of the row next() is reading: `node`, the path, the row's line and offset, `reason`.
  [[nodiscard]] DataError row_error(std::string_view node, std::string_view reason) const;

  CsvRules rules_;
  CsvStops unquoted_{};           // the bytes that end a run of an unquoted field
  CsvStops quoted_{};             // the bytes that end a run of a quoted field
  bool lines_skipped_ = false;    // skip_lines is done for this file
  std::uint64_t row_line_ = 0;    // where the last row starts (count_: the line ends consumed)
  std::uint64_t row_offset_ = 0;  // idem, in bytes
  std::size_t width_ = 0;         // the field count of the last row: the next row's reserve
};

}  // namespace dpipe::io::detail

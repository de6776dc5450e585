#pragma once
/// \file
/// RecordCursor: the framing half of tfrecord_records() and load_from_tfrecord().

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io::detail {

/// How records are read.
struct RecordRules {
  bool verify_crc = true;
  std::uint64_t max_record_bytes = 0;
};

/// Reads the TFRecord records of one file at a time, in blocks of 64 KiB or more, and knows where
/// the next record starts, so that a checkpoint reopens the file there. Records are numbered from
/// 1 in each file. Thread-safety: one thread.
class RecordCursor {
 public:
  explicit RecordCursor(RecordRules rules) : rules_(rules) {}
  RecordCursor(const RecordCursor& other) : rules_(other.rules_) {}  // a copy reads no file
  RecordCursor& operator=(const RecordCursor&) = delete;
  RecordCursor(RecordCursor&&) = delete;
  RecordCursor& operator=(RecordCursor&&) = delete;

  /// Whether a file is being read.
  [[nodiscard]] bool reading() const noexcept { return file_.has_value(); }
  /// Starts reading `file` from its current offset, as its record 1.
  void start(OpenedFile file);
  /// Stops reading the current file.
  void close() noexcept;

  /// Reads the next record of the current file. With `owned`, its bytes go into *owned (read
  /// straight into it when the record is large) and `record` views them; without, `record` views
  /// the cursor's buffer, valid until the next call. Returns false at the end of the file, which is
  /// closed. A DataError naming `node` when the record is bad: after a data CRC mismatch the
  /// cursor is past the record (the next call reads the one after it); a read error, a truncated
  /// record, a length whose CRC does not match or that is more than max_record_bytes close the
  /// file (its framing cannot be trusted any more).
  bool next(std::string_view& record, std::string* owned, std::string_view node);

  /// A DataError about the record next() returned last: `reason` after "record N: ".
  [[nodiscard]] DataError record_error(std::string_view reason, std::string_view node) const;

  /// The file, the offset of its next record and the records read ("file", "offset", "record").
  void save(StateWriter& writer) const;
  /// Reopens the saved file at the saved offset; StateError naming `node` when it cannot.
  void load(const StateReader& reader, std::string_view node);

 private:
  /// Reads until `count` bytes are buffered from begin_; false when the file ends first.
  bool ensure(std::size_t count, std::string_view node);
  /// Reads into `data` from the file; a read error closes the file before its DataError leaves.
  std::size_t read_file(char* data, std::size_t size, std::string_view node);
  /// Closes the file and returns the DataError about the current record.
  [[nodiscard]] DataError framing_error(std::string_view reason, std::string_view node);
  /// The offset of the first byte not consumed.
  [[nodiscard]] std::uint64_t next_offset() const noexcept { return file_->offset() - (end_ - begin_); }

  RecordRules rules_;
  std::optional<OpenedFile> file_;
  std::string path_;  // of the last file read, for errors after it closed
  std::vector<char> buffer_;
  std::string scratch_;          // a large record's bytes, when the caller owns none
  std::size_t begin_ = 0;        // the first byte of buffer_ not consumed
  std::size_t end_ = 0;          // the end of what buffer_ holds
  std::uint64_t record_ = 0;     // records consumed from the current file, bad ones included
  std::uint64_t at_offset_ = 0;  // where the current (or last) record starts
};

}  // namespace dpipe::io::detail

#pragma once
/// \file
/// RecordCursor: the framing half of tfrecord_records() and load_from_tfrecord().

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <dpipe/core/error.hpp>
#include <dpipe/io/file_cursor.hpp>

namespace dpipe::io::detail {

/// How records are read.
struct RecordRules {
  bool verify_crc = true;
  std::uint64_t max_record_bytes = 0;
};

/// Reads the TFRecord records of one file at a time, in blocks of 64 KiB or more, and knows where
/// the next record starts, so that a checkpoint reopens the file there (FileCursor; its count is
/// the records read, bad ones included). Records are numbered from 1 in each file. Thread-safety:
/// one thread.
class RecordCursor final : public FileCursor {
 public:
  explicit RecordCursor(RecordRules rules) : rules_(rules) {}

  /// Starts reading `file` from its current offset, as its record 1.
  void start(OpenedFile file);
  /// Stops reading the current file and lets go of a large record's bytes.
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

 private:
  /// Reads until `count` bytes are buffered from begin_; false when the file ends first.
  bool ensure(std::size_t count, std::string_view node);
  /// Closes the file and returns the DataError about the current record.
  [[nodiscard]] DataError framing_error(std::string_view reason, std::string_view node);

  RecordRules rules_;
  std::string scratch_;          // a large record's bytes, when the caller owns none
  std::uint64_t at_offset_ = 0;  // where the current (or last) record starts
};

}  // namespace dpipe::io::detail

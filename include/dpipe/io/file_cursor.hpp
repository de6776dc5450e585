#pragma once
/// \file
/// dpipe::io::FileCursor: the base of a format's cursor (lines, CSV rows, TFRecord records, a
/// user's own records): the file being read, a buffer of its bytes, where the next unit starts,
/// and their checkpoint (docs/writing-nodes.md#a-format-node).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/core/state.hpp>
#include <dpipe/io/opened_file.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::io {

/// Where a cursor is: what its checkpoint holds ("position").
struct FilePosition {
  bool reading = false;      ///< a file is being read
  std::string origin{};      ///< its OpenedFile::origin()
  std::uint64_t offset = 0;  ///< the byte offset of its next unit
  std::uint64_t count = 0;   ///< the units (lines, records) consumed from it before that offset
  DPIPE_FIELDS(reading, origin, offset, count)
};

/// Reads one file at a time into a buffer: bytes [begin_, end_) of buffer_ are read and not yet
/// consumed, and count_ counts the units the derived cursor consumed. A derived cursor reads a
/// unit with read_more() until it is buffered, consumes it by moving begin_ past it (and counting
/// it), and close()s the file at its end. A unit it cannot read is a DataError naming path() and
/// the unit's offset (next_offset() before it consumes it); when the file cannot go on past it
/// (its framing broke, it ends inside a unit), it close()s the file first. A checkpoint saves the
/// file's origin and next_offset(); a restore reopens the file there (OpenedFile::reopen) and
/// reads nothing before it. Thread-safety: one thread.
class FileCursor {
 public:
  /// Whether a file is being read.
  [[nodiscard]] bool reading() const noexcept { return file_.has_value(); }
  /// The path of the file being read (while reading()).
  [[nodiscard]] const std::string& path() const noexcept { return file_->path(); }
  /// Starts reading `file` from its current offset, with no unit consumed.
  void start(OpenedFile file);
  /// Stops reading the current file.
  void close() noexcept;

  /// Saves the file, the offset of the next unit and count_ (a FilePosition, "position").
  void save_state(StateWriter& writer) const;
  /// Reopens the saved file at the saved offset and restores count_; StateError naming `node`
  /// when it cannot. Returns whether a file is being read again.
  bool load_state(const StateReader& reader, std::string_view node);

 protected:
  FileCursor() = default;
  FileCursor(const FileCursor& /*other*/) : FileCursor() {}  // a copy reads no file
  FileCursor& operator=(const FileCursor&) = delete;
  ~FileCursor() = default;

  /// Reads more of the file behind what is buffered, first moving the unconsumed bytes to the
  /// front (and growing the buffer) when fewer than `room` bytes are free behind them. Returns how
  /// many came, 0 at the end of the file (and after it). A read error closes the file before its
  /// DataError, naming `node`, leaves.
  std::size_t read_more(std::string_view node, std::size_t room);
  /// Reads from the file straight into `data` (past the buffer); a read error closes the file
  /// before its DataError leaves.
  std::size_t read_direct(char* data, std::size_t size, std::string_view node);
  /// The offset of the first byte not consumed.
  [[nodiscard]] std::uint64_t next_offset() const noexcept { return file_->offset() - (end_ - begin_); }

  std::optional<OpenedFile> file_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;    // the first byte of buffer_ not consumed
  std::size_t end_ = 0;      // the end of what buffer_ holds
  std::uint64_t count_ = 0;  // units consumed from the current file
  bool at_end_ = false;      // the file has no bytes beyond end_
};

}  // namespace dpipe::io

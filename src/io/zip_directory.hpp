#pragma once
/// \file
/// ZipDirectory: the central directory of a zip in a local file, against which load_from_zip checks
/// each local header libarchive's streaming reader meets. Private to src/io.
///
/// Why not libarchive's seekable zip reader: in libarchive 3.6 it compares a local header's CRC32
/// and sizes with the central directory's but not its name (a renamed or duplicated member passes),
/// and it cannot start at a member, as a restore does.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dpipe::io::detail {

/// A local zip file's central directory, and the member the stream must read next. Thread-safety:
/// one thread at a time.
class ZipDirectory {
 public:
  /// Reads the central directory of the zip file `path` (the end record, zip64's when there is
  /// one, and every entry), for a stream that starts at byte `from` of the file (a restore starts
  /// at a member's local header). DataError naming `node` and `path` when the file cannot be read,
  /// or has no central directory or a damaged one.
  ZipDirectory(std::string path, std::uint64_t from, std::string_view node);
  ZipDirectory(const ZipDirectory&) = delete;
  ZipDirectory& operator=(const ZipDirectory&) = delete;
  ~ZipDirectory();

  /// Checks the member the stream has just read, whose local header ends at byte `header_end` of
  /// the file: it must be the next member the central directory lists (by offset), and its local
  /// header must agree with the directory's entry (name; CRC32 and sizes unless the local header
  /// defers them to a data descriptor). Returns the offset of that local header. DataError naming
  /// the member as the directory names it, and its offset, otherwise.
  std::uint64_t check_next(std::uint64_t header_end);

  /// At the end of the stream: DataError naming the first member the central directory lists that
  /// the stream did not reach.
  void check_end() const;

 private:
  struct Entry {
    std::string name;
    std::uint16_t flags = 0;
    std::uint32_t crc = 0;
    std::uint64_t compressed = 0;
    std::uint64_t size = 0;
    std::uint64_t offset = 0;  // of the local header, in the file
  };

  /// The file's bytes at `offset`: `size` of them, DataError when the file has fewer.
  [[nodiscard]] std::string read(std::uint64_t offset, std::size_t size) const;
  /// The entries of the central directory, read from the end record at the end of the file.
  void read_entries(std::uint64_t file_size);

  std::string path_;
  std::string node_;
  int descriptor_ = -1;
  std::vector<Entry> entries_;  // by offset
  std::size_t next_ = 0;        // the entry the stream reads next
};

}  // namespace dpipe::io::detail

#pragma once
/// \file
/// ArchiveStream: libarchive reading from an io::OpenedFile, for decompress() (one compressed
/// stream) and the archive nodes (tar, zip). Private to src/io: no public header names libarchive.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/opened_file.hpp>

struct archive;

namespace dpipe::io::detail {

/// What the stream holds.
enum class ArchiveKind {
  kCompressedStream,  ///< one stream through one decompressor (libarchive's raw format)
  kTar,               ///< a tar, plain or compressed with any filter libarchive knows
  kZip,               ///< a zip, read front to back
};

/// The decompressor a compressed stream must use: libarchive's filter code and its name.
struct ArchiveFilter {
  int code = 0;
  std::string_view name{};
};

/// One member's header.
struct ArchiveMember {
  std::string name;
  std::uint64_t size = 0;
  bool regular = false;  ///< a file (not a directory, link or device)
};

/// libarchive over an OpenedFile. A compressed tar is decompressed before libarchive reads it as a
/// plain tar, its bytes held back until their check passed (up to kDefaultHoldBack): a gzip one by
/// GzipSource, which checks the gzip trailers libarchive's filter ignores, member by member; a bz2,
/// xz, lzma or zstd one by a FilteredSource, whose stream is checked at its end. read_* failures
/// are SourceFailure with libarchive's reason, or the DataError the file itself raised.
/// Thread-safety: one thread at a time.
class ArchiveStream {
 public:
  /// Opens `file` as `kind`; a compressed stream must use `filter`, and `head` holds the bytes
  /// already read from its start. DataError naming `node` when `file` is not what `kind` says.
  ArchiveStream(OpenedFile file, ArchiveKind kind, std::string_view node, ArchiveFilter filter = {},
                std::string_view head = {});
  ArchiveStream(const ArchiveStream&) = delete;
  ArchiveStream& operator=(const ArchiveStream&) = delete;
  ~ArchiveStream();

  /// The next member's header, false after the last one. Every status but ARCHIVE_OK throws:
  /// libarchive's warnings on a header mean lost or skipped data (a damaged tar header it would
  /// skip to the next one, a malformed pax attribute, a name it cannot convert). The name is read
  /// as UTF-8 whatever the program's locale; a member whose name cannot be read, or is empty,
  /// throws. On a throw `member.name` is the header's name when it was read, "" otherwise.
  bool next_member(ArchiveMember& member);
  /// Reads up to `size` bytes of the current member; 0 at its end.
  std::size_t read(char* data, std::size_t size);
  /// The next block of the current member without a copy: its bytes (valid until the next call)
  /// and their offset in the member (past a hole of a sparse member); false at its end.
  bool read_block(std::string_view& block, std::uint64_t& offset);

  /// Where the current member's header starts, in the uncompressed bytes read since the open;
  /// std::nullopt when libarchive cannot tell (after a fatal error).
  [[nodiscard]] std::optional<std::uint64_t> header_offset() const noexcept;
  /// The (uncompressed) bytes libarchive has consumed since the open: right after next_member()
  /// of a zip, where the member's local header ends.
  [[nodiscard]] std::uint64_t consumed() const noexcept;
  /// Whether the stream goes through a decompressor (told from its bytes at the open).
  [[nodiscard]] bool compressed() const noexcept;

 private:
  static ssize_t read_callback(archive* handle, void* self, const void** buffer);
  /// Throws what the file raised during the last libarchive call, or a SourceFailure with
  /// libarchive's reason (after `context` and ": " when given).
  [[noreturn]] void fail(std::string_view context = {});

  OpenedFile file_;  // moved into decompressed_ for a compressed tar
  std::string node_;
  std::unique_ptr<ByteSource> decompressed_;  // a compressed tar, decompressed here with its checks
  archive* handle_ = nullptr;
  std::vector<char> buffer_;
  std::size_t pending_ = 0;  // bytes at the front of buffer_ read before libarchive started
  std::exception_ptr file_error_;
};

}  // namespace dpipe::io::detail

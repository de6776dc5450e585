#pragma once
/// \file
/// dpipe::io::OpenedFile: a stream of bytes open for reading (a file, a decompressed file, an HTTP
/// body, a stream of a user's scheme), as `open_files()`, `decompress()` and `read_from_http()`
/// yield it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace dpipe::io {

class ByteSource;

/// A stream open for reading: its name (a path or a URL), where it comes from, its bytes and an
/// offset. Move-only, and without a Serializer on purpose: an open stream never crosses to a
/// worker process. Pipelines send paths across (list, shuffle and shard paths) and open them in
/// the workers. Readers checkpoint a stream as its origin() and an offset, and reopen() it at a
/// restore. Thread-safety: one thread at a time.
class OpenedFile {
 public:
  /// Opens `path` for reading: a "<scheme>://..." path ("https://host/a.txt", "mem://a") through
  /// the opener registered for its scheme (<dpipe/io/opener.hpp>), any other path as a local file.
  /// DataError naming `node` and the path when it cannot (a missing or unreadable file, a
  /// directory, a scheme without an opener). Thread-safe.
  [[nodiscard]] static OpenedFile open(std::string path, std::string_view node = "open_files");

  /// Opens the stream a checkpoint saved as `origin` again, through the opener registered for the
  /// origin's scheme, and moves it to `offset`: a file seeks there, a decompressed or HTTP stream
  /// reads up to it. DataError naming `node` when it cannot (a scheme without an opener, the
  /// stream is gone or shorter than `offset`). Thread-safe.
  [[nodiscard]] static OpenedFile reopen(const std::string& origin, std::uint64_t offset, std::string_view node);

  /// A stream named `path` in errors, opened again from `origin` at a restore (see reopen()).
  OpenedFile(std::string path, std::string origin, std::unique_ptr<ByteSource> source) noexcept;

  OpenedFile(OpenedFile&& other) noexcept;
  OpenedFile& operator=(OpenedFile&& other) noexcept;
  OpenedFile(const OpenedFile&) = delete;
  OpenedFile& operator=(const OpenedFile&) = delete;
  ~OpenedFile();

  /// The file's path, or the URL.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// How to open this stream again, starting with its scheme: "file:<path>", "http[<settings>]:<url>",
  /// "<format>[<max_bytes>]:<inner origin>" for a decompressed stream, what a user's opener makes.
  /// What readers save in a checkpoint, with offset().
  [[nodiscard]] const std::string& origin() const noexcept { return origin_; }
  /// The offset of the next byte read() returns (in the decompressed bytes of a compressed file).
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }

  /// Reads up to `size` bytes into `data`; returns how many, 0 at the end of the stream. DataError
  /// naming `node`, the path and the offset on a read error.
  std::size_t read(char* data, std::size_t size, std::string_view node);

  /// Moves to `offset` from the start: a file seeks, another stream reads forward (an offset
  /// behind the current one is a DataError there). DataError naming `node` when the stream is
  /// shorter.
  void seek(std::uint64_t offset, std::string_view node);

  /// Reads up to `bytes` ahead into memory where the stream comes over a network (an S3 object),
  /// so that the next reads wait for no round trip; nothing for a file. DataError naming `node`
  /// on a read error.
  void prefetch(std::size_t bytes, std::string_view node);

 private:
  std::string path_;
  std::string origin_;
  std::unique_ptr<ByteSource> source_;
  std::uint64_t offset_ = 0;
};

}  // namespace dpipe::io

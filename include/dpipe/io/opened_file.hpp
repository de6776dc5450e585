#pragma once
/// \file
/// dpipe::io::OpenedFile: a file open for reading, as `open_files()` yields it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dpipe::io {

/// A file open for reading: its path, a descriptor and an offset. Move-only, and without a
/// Serializer on purpose: an open file never crosses to a worker process. Pipelines send paths
/// across (list, shuffle and shard paths) and open them in the workers.
/// Thread-safety: one thread at a time.
class OpenedFile {
 public:
  /// Opens `path` for reading; DataError naming `node` and the path when it cannot (a missing or
  /// unreadable file, a directory).
  [[nodiscard]] static OpenedFile open(std::string path, std::string_view node = "open_files");

  OpenedFile(OpenedFile&& other) noexcept;
  OpenedFile& operator=(OpenedFile&& other) noexcept;
  OpenedFile(const OpenedFile&) = delete;
  OpenedFile& operator=(const OpenedFile&) = delete;
  ~OpenedFile();

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// The offset of the next byte read() returns.
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }

  /// Reads up to `size` bytes into `data`; returns how many, 0 at the end of the file. DataError
  /// naming `node`, the path and the offset on a read error.
  std::size_t read(char* data, std::size_t size, std::string_view node);

  /// Moves to `offset` from the start; DataError naming `node` when the file is shorter.
  void seek(std::uint64_t offset, std::string_view node);

 private:
  OpenedFile(std::string path, int descriptor) noexcept;

  std::string path_;
  int descriptor_ = -1;
  std::uint64_t offset_ = 0;
};

}  // namespace dpipe::io

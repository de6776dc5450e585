#pragma once
/// \file
/// `io::decompress(options)` (torchdata's Decompressor): each opened file read through its
/// decompressor (gzip, bz2, xz / lzma, zstd), detected from the file's extension or given.
/// Stateless: readers downstream save the decompressed offset, and a restore decompresses the one
/// file it is in up to that offset.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/detail/each_input.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io {

/// A stream compression format.
enum class Compression {
  kDetect,  ///< from the file's extension: .gz / .tgz, .bz2, .xz, .lzma, .zst / .zstd
  kGzip,
  kBzip2,
  kXz,
  kLzma,
  kZstd,
};

/// The format's name in messages and stream origins: "gzip", "bz2", "xz", "lzma", "zstd" ("detect").
[[nodiscard]] std::string_view compression_name(Compression compression) noexcept;

/// The compression a path's extension names, or std::nullopt.
[[nodiscard]] std::optional<Compression> compression_of(std::string_view path) noexcept;

struct DecompressOptions {
  /// The format of every file, or kDetect to tell it from each file's extension.
  Compression format = Compression::kDetect;
  /// A file that decompresses to more bytes than this is a DataError when the reader gets there
  /// (decompression bombs); 0 for no limit.
  std::uint64_t max_bytes = 0;
  /// A file whose compression cannot be told from its extension: raise, or skip it.
  OnError on_error = {};
};

/// Opens `file` through the decompressor for `format` (kDetect: from its path). DataError naming
/// `node` when the format cannot be told or the file does not start as that format says.
[[nodiscard]] OpenedFile open_decompressed(OpenedFile file, Compression format, std::uint64_t max_bytes,
                                           std::string_view node);

/// Yields each file its source opens, decompressed. A corrupt or truncated stream is a DataError
/// from the reader that meets it, naming the file and the decompressed offset.
/// Thread-safety: one iterating thread.
class Decompressor final : public detail::EachInput<OpenedFile, OpenedFile> {
 public:
  static constexpr std::string_view kName = "decompress";

  Decompressor(const IterPipe<OpenedFile>& files, DecompressOptions options)
      : EachInput(kName, files, options.on_error), options_(options) {}

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Decompressor>(*this); }
  [[nodiscard]] bool stateless() const noexcept override { return true; }
  [[nodiscard]] NodeSettings settings() const override;

 protected:
  OpenedFile make(OpenedFile file) override;

 private:
  DecompressOptions options_;
};

/// `files | io::decompress()`.
[[nodiscard]] inline auto decompress(DecompressOptions options = {}) {
  return PipeAdaptor{[=](const IterPipe<OpenedFile>& files) { return make_iter<Decompressor>(files, options); }};
}

}  // namespace dpipe::io

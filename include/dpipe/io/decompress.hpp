#pragma once
/// \file
/// `io::decompress(options)` (torchdata's Decompressor): each opened file read through its
/// decompressor (gzip, bz2, xz / lzma, zstd), detected from the file's extension or given.
/// Stateless: readers downstream save the decompressed offset, and a restore decompresses the one
/// file it is in up to that offset. Decompressed bytes are held back until their integrity check
/// passes (DecompressOptions::hold_back), so no reader yields what a corrupt member or stream
/// produced, as long as it is not longer than hold_back.

#include <cstdint>
#include <memory>
#include <optional>
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

/// DecompressOptions::hold_back's default: 64 MiB.
inline constexpr std::uint64_t kDefaultHoldBack = std::uint64_t{64} << 20;

/// The compression a path's extension names, or std::nullopt.
[[nodiscard]] std::optional<Compression> compression_of(std::string_view path) noexcept;

struct DecompressOptions {
  /// The format of every file, or kDetect to tell it from each file's extension.
  Compression format = Compression::kDetect;
  /// A file that decompresses to more bytes than this is a DataError when the reader gets there
  /// (decompression bombs); 0 for no limit.
  std::uint64_t max_bytes = 0;
  /// The most decompressed bytes held back until the check that covers them passes: a gzip
  /// member's CRC32 and length, or for bz2, xz, lzma and zstd the end of the stream, where every
  /// check of its blocks or frames has passed (libarchive, which decodes them, does not tell where
  /// one ends). A longer member or stream is passed on unchecked whenever hold_back bytes of it
  /// wait, and a DataError met after that says how many of its bytes went on unchecked and from
  /// which offset. 0 holds nothing back. Each open file holds up to this much memory (and 256 KiB).
  std::uint64_t hold_back = kDefaultHoldBack;
  /// A file whose compression cannot be told from its extension: raise, or skip it.
  OnError on_error = {};
};

/// Opens `file` through the decompressor for `format` (kDetect: from its path), holding back up to
/// `hold_back` bytes (DecompressOptions::hold_back). DataError naming `node` when the format
/// cannot be told or the file does not start as that format says.
[[nodiscard]] OpenedFile open_decompressed(OpenedFile file, Compression format, std::uint64_t max_bytes,
                                           std::string_view node, std::uint64_t hold_back = kDefaultHoldBack);

/// Yields each file its source opens, decompressed. A corrupt or truncated stream is a DataError
/// from the reader that meets it, naming the file and the decompressed offset: the offset where
/// the checked bytes end, since the bytes of the failing member or stream are never passed on
/// (within hold_back).
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

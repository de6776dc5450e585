#pragma once
/// \file
/// FilteredSource: one compressed stream through one of libarchive's filters (bz2, xz, lzma,
/// zstd), the checked decompressor behind decompress() and a compressed tar. Private to src/io.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <dpipe/io/opened_file.hpp>

#include "io/archive_stream.hpp"
#include "io/hold_back.hpp"

namespace dpipe::io::detail {

/// The filter (bz2, xz, lzma or zstd) whose magic bytes `head`, the first bytes of a stream,
/// start with, told as libarchive's filters tell it; std::nullopt for any other bytes.
[[nodiscard]] std::optional<ArchiveFilter> filter_of_head(std::string_view head) noexcept;

/// One stream through one of libarchive's filters. libarchive does not tell where a block or
/// frame ends, so the stream is the unit its checks cover. Thread-safety: one thread at a time.
class FilteredSource final : public CheckedSource {
 public:
  /// Decompresses `file` with `filter`; `head` holds the bytes already read from its start.
  /// DataError naming `node` when the file does not start as `filter` says.
  FilteredSource(OpenedFile file, ArchiveFilter filter, std::string_view node, std::string_view head = {});

  std::size_t read(char* data, std::size_t size) override { return at_end_ ? 0 : stream_.read(data, size); }
  [[nodiscard]] std::uint64_t checked() const noexcept override { return 0; }
  [[nodiscard]] std::string_view unit() const noexcept override { return "stream"; }

 private:
  ArchiveStream stream_;
  bool at_end_ = false;
};

}  // namespace dpipe::io::detail

#pragma once
/// \file
/// GzipSource: gzip decompressed with zlib's inflate, which checks each member's trailer (CRC32 and
/// ISIZE). libarchive's gzip filter does not check it, so a bit flip in the compressed data could
/// pass as other bytes. Private to src/io: no public header names zlib.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/io/opened_file.hpp>

#include "io/hold_back.hpp"

namespace dpipe::io::detail {

/// Whether `head`, the first bytes of a stream, starts like gzip (0x1f 0x8b).
[[nodiscard]] bool starts_as_gzip(std::string_view head) noexcept;

/// Reads the first bytes of `file` into `buffer` (one read, more only while fewer than 2 came and
/// the file goes on); returns how many. DataError naming `node` on a read error.
std::size_t read_head(OpenedFile& file, std::vector<char>& buffer, std::string_view node);

/// The decompressed bytes of a gzip stream: one member or several concatenated (as `gzip -d`
/// reads them), zero bytes after the last one ignored (as Python's gzip module does). A member
/// whose trailer does not match its data, a truncated stream or bytes that are not gzip where a
/// member should start are a SourceFailure; a read error of the file is its own DataError. The
/// bytes of a member are checked() once its trailer matched. Thread-safety: one thread at a time.
class GzipSource final : public CheckedSource {
 public:
  /// Decompresses `file`, whose first bytes, `head`, were already read from it. `node` names the
  /// node in the file's own errors.
  GzipSource(OpenedFile file, std::string_view head, std::string_view node);
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;
  ~GzipSource() override;

  std::size_t read(char* data, std::size_t size) override;
  [[nodiscard]] std::uint64_t checked() const noexcept override { return checked_; }
  [[nodiscard]] std::string_view unit() const noexcept override { return "member"; }

 private:
  /// Refills the input from the file when it is used up; false at the end of the file.
  bool refill();

  struct Inflater;  // zlib's z_stream, kept out of this header
  OpenedFile file_;
  std::string node_;
  std::unique_ptr<Inflater> inflater_;
  std::vector<char> input_;       // compressed bytes; zlib's next_in points into it
  bool between_members_ = false;  // the last member ended; the next byte starts another (or padding)
  bool ended_ = false;            // the stream ended cleanly
  std::uint64_t returned_ = 0;    // bytes read() returned before this call
  std::uint64_t checked_ = 0;     // bytes up to the end of the last member whose trailer matched
};

}  // namespace dpipe::io::detail

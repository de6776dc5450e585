#pragma once
/// \file
/// `io::load_from_tar(options)` and `io::load_from_zip(options)` (torchdata's TarArchiveLoader and
/// ZipArchiveLoader): the files inside each opened archive, as (path, bytes) pairs whose path is
/// the archive's path joined with the member's name. Read with libarchive, front to back;
/// checkpoint state: the archive and the header offset of the member last yielded.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/detail/element_skipper.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io {
namespace detail {
class OpenArchive;
}  // namespace detail

/// A file and its bytes: a member of an archive ("shard-0.tar/000017.jpg", its bytes).
using PathBytes = std::pair<std::string, std::string>;

struct ArchiveOptions {
  /// A member larger than this is a DataError (or skipped, with OnError::skip): it would be held
  /// in memory whole. Decompression bombs stop here.
  std::uint64_t max_member_bytes = std::uint64_t{1} << 30;
  /// A member over the limit is skipped alone; a truncated or corrupt archive loses the rest of
  /// that archive.
  OnError on_error = {};
};

/// The archive formats ArchiveLoader reads.
enum class ArchiveFormat {
  kTar,  ///< plain, or compressed with gzip, bz2, xz, lzma or zstd (told from its bytes)
  kZip,  ///< read front to back, stored or deflated members; a local file's central directory is
         ///< checked against each local header
};

/// Yields the regular files of each archive its source opens, in archive order; directories and
/// links are passed over. Member names are UTF-8 whatever the program's locale. Every warning
/// libarchive gives on a header is a DataError, as is a name that cannot be read or is empty.
/// Errors name the archive, the member and the offset of its header (when libarchive knows it).
/// Thread-safety: one iterating thread.
class ArchiveLoader final : public IterDataPipe<PathBytes> {
 public:
  static constexpr std::string_view kName = "load_from_tar";
  static constexpr std::string_view kZipName = "load_from_zip";

  ArchiveLoader(const IterPipe<OpenedFile>& archives, ArchiveFormat format, ArchiveOptions options);
  ArchiveLoader(const ArchiveLoader& other);
  ArchiveLoader& operator=(const ArchiveLoader&) = delete;
  ~ArchiveLoader() override;

  void for_each_input(const InputVisitor& visit) override { visit(archives_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<ArchiveLoader>(*this); }
  [[nodiscard]] NodeSettings settings() const override;

  /// The members and archive ends skipped in this epoch.
  [[nodiscard]] std::uint64_t skipped() const noexcept { return skipper_.skipped(); }

  /// The archive being read ("" between archives), the header offset and name of the member last
  /// yielded, and whether the archive is compressed (a restore then reads it from its start).
  [[nodiscard]] bool save_state(StateWriter& writer) const override;
  void load_state(const StateReader& reader) override;

 protected:
  void reset_impl() override;
  std::optional<PathBytes> next_impl() override;

 private:
  /// The next member of the open archive, or std::nullopt at its end (the archive is closed).
  std::optional<PathBytes> next_member();

  Input<OpenedFile> archives_;
  ArchiveFormat format_;
  ArchiveOptions options_;
  std::unique_ptr<detail::OpenArchive> open_;
  dpipe::detail::ElementSkipper skipper_;
};

/// `files | io::load_from_tar(options)`.
[[nodiscard]] inline auto load_from_tar(ArchiveOptions options = {}) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<ArchiveLoader>(files, ArchiveFormat::kTar, options); }};
}

/// `files | io::load_from_zip(options)`.
[[nodiscard]] inline auto load_from_zip(ArchiveOptions options = {}) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<ArchiveLoader>(files, ArchiveFormat::kZip, options); }};
}

}  // namespace dpipe::io

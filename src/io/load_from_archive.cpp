#include <filesystem>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/load_from_archive.hpp>

#include "io/archive_stream.hpp"
#include "io/zip_directory.hpp"

namespace dpipe::io {
namespace detail {

/// The archive being read: libarchive's stream, the offset in the archive where that stream
/// started (a restore of a plain tar starts at a member's header), the central directory of a
/// zip in a local file, and the member last yielded.
class OpenArchive {
 public:
  OpenArchive(OpenedFile file, ArchiveFormat format, std::uint64_t base, std::string_view node)
      : path_(file.path()),
        origin_(file.origin()),
        stream_(std::move(file), format == ArchiveFormat::kTar ? ArchiveKind::kTar : ArchiveKind::kZip, node),
        base_(base) {
    if (format == ArchiveFormat::kZip && origin_.starts_with(kLocalOrigin))
      directory_.emplace(origin_.substr(kLocalOrigin.size()), base, node);
  }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] const std::string& origin() const noexcept { return origin_; }
  [[nodiscard]] ArchiveStream& stream() noexcept { return stream_; }

  /// The next member's header (ArchiveStream::next_member), false after the last one; a zip's
  /// local header checked against its central directory (a DataError when they disagree).
  bool next_member(ArchiveMember& member) {
    checked_header_.reset();
    if (!stream_.next_member(member)) {
      if (directory_) directory_->check_end();
      return false;
    }
    if (directory_) checked_header_ = directory_->check_next(base_ + stream_.consumed());
    return true;
  }

  /// The current member's header offset in the archive's (uncompressed) bytes; std::nullopt when
  /// libarchive cannot tell (after a fatal error). A zip's is the central directory's: libarchive's
  /// lies before it when the last member's data descriptor was not read.
  [[nodiscard]] std::optional<std::uint64_t> header_offset() const noexcept {
    if (checked_header_) return checked_header_;
    const auto offset = stream_.header_offset();
    if (!offset) return std::nullopt;
    return base_ + *offset;
  }

  std::uint64_t yielded_header = 0;  // the header offset of the member last yielded
  std::string yielded_name;          // and its name

 private:
  static constexpr std::string_view kLocalOrigin = "file:";

  std::string path_;
  std::string origin_;
  ArchiveStream stream_;
  std::uint64_t base_;
  std::optional<ZipDirectory> directory_;
  std::optional<std::uint64_t> checked_header_;  // the current member's, checked against directory_
};

}  // namespace detail

namespace {

std::string member_path(const std::string& archive, const std::string& member) {
  return (std::filesystem::path(archive) / member).lexically_normal().string();
}

}  // namespace

ArchiveLoader::ArchiveLoader(const IterPipe<OpenedFile>& archives, ArchiveFormat format, ArchiveOptions options)
    : IterDataPipe<PathBytes>(std::string(format == ArchiveFormat::kTar ? kName : kZipName)),
      archives_(archives.ptr()),
      format_(format),
      options_(options),
      skipper_(options.on_error) {
  if (options.max_member_bytes == 0)
    DPIPE_THROW(InvalidArgument, "{}: max_member_bytes must be > 0", format == ArchiveFormat::kTar ? kName : kZipName);
}

// A copy reads no archive.
ArchiveLoader::ArchiveLoader(const ArchiveLoader& other)
    : IterDataPipe<PathBytes>(other),
      archives_(other.archives_),
      format_(other.format_),
      options_(other.options_),
      skipper_(other.skipper_.policy()) {}

ArchiveLoader::~ArchiveLoader() = default;

NodeSettings ArchiveLoader::settings() const {
  return {{"max_member_bytes", std::to_string(options_.max_member_bytes)}};
}

void ArchiveLoader::reset_impl() {
  open_.reset();
  skipper_.reset();
  archives_.reset();
}

std::optional<PathBytes> ArchiveLoader::next_impl() {
  for (;;) {
    try {
      if (!open_) {
        auto archive = archives_.next();
        if (!archive) return std::nullopt;
        open_ = std::make_unique<detail::OpenArchive>(std::move(*archive), format_, 0, label());
      }
      if (auto member = next_member()) return member;
    } catch (const DataError& error) {
      skipper_.skip_bad_data(error);
      count_skipped();
    }
  }
}

std::optional<PathBytes> ArchiveLoader::next_member() {
  detail::ArchiveMember member;
  auto fail = [&](std::string_view reason, const std::string& name, std::optional<std::uint64_t> offset) -> DataError {
    DataError error(label(), {.path = open_->path(), .member = name, .byte_offset = offset}, reason);
    open_.reset();  // nothing after a damaged spot can be trusted
    return error;
  };
  for (;;) {
    try {
      if (!open_->next_member(member)) {
        open_.reset();
        return std::nullopt;
      }
    } catch (const SourceFailure& failure) {
      throw fail(failure.what(), member.name, open_->header_offset());
    } catch (const DataError&) {
      open_.reset();
      throw;
    }
    if (member.regular) break;
  }
  const std::uint64_t header = open_->header_offset().value();  // known after a header read without error
  open_->yielded_header = header;
  open_->yielded_name = member.name;
  if (member.size > options_.max_member_bytes) {  // the archive goes on with the next member
    throw DataError(label(), {.path = open_->path(), .member = member.name, .byte_offset = header},
                    fmt::format("the member has {} bytes, more than max_member_bytes ({})", member.size,
                                options_.max_member_bytes));
  }
  std::string bytes;
  bytes.reserve(static_cast<std::size_t>(member.size));
  try {
    std::string_view block;
    std::uint64_t offset = 0;
    while (open_->stream().read_block(block, offset)) {
      // A zip member may not say its size before its data: the limit holds as the bytes come.
      if (offset + block.size() > options_.max_member_bytes)
        throw fail(fmt::format("the member has more than max_member_bytes ({})", options_.max_member_bytes),
                   member.name, header);
      if (offset > bytes.size()) bytes.resize(static_cast<std::size_t>(offset));  // a hole of a sparse member
      bytes.append(block);
    }
  } catch (const SourceFailure& failure) {
    throw fail(failure.what(), member.name, header);
  } catch (const DataError&) {
    open_.reset();
    throw;
  }
  return PathBytes{member_path(open_->path(), member.name), std::move(bytes)};
}

bool ArchiveLoader::save_state(StateWriter& writer) const {
  writer.write("archive", open_ ? open_->origin() : std::string());
  writer.write("header", open_ ? open_->yielded_header : std::uint64_t{0});
  writer.write("member", open_ ? open_->yielded_name : std::string());
  writer.write("compressed", open_ && open_->stream().compressed());
  skipper_.save_state(writer);
  return true;
}

void ArchiveLoader::load_state(const StateReader& reader) {
  open_.reset();
  const auto origin = reader.read<std::string>("archive");
  const auto header = reader.read<std::uint64_t>("header");
  const auto name = reader.read<std::string>("member");
  const auto compressed = reader.read<bool>("compressed");
  skipper_.load_state(reader);
  if (origin.empty()) return;
  try {
    // A plain archive is opened at the member's header; a compressed one is read from its start.
    const std::uint64_t base = compressed ? 0 : header;
    open_ = std::make_unique<detail::OpenArchive>(OpenedFile::reopen(origin, base, label()), format_, base, label());
    detail::ArchiveMember member;
    while (open_->next_member(member) && open_->header_offset() < header) {
    }
    if (open_->header_offset() != header || member.name != name) {
      open_.reset();
      DPIPE_THROW(StateError, "{}: the archive '{}' changed since the checkpoint: no member '{}' at byte {}", label(),
                  origin, name, header);
    }
    open_->yielded_header = header;
    open_->yielded_name = name;
  } catch (const DataError& error) {
    open_.reset();
    DPIPE_THROW(StateError, "{}: cannot continue the archive the checkpoint was reading: {}", label(), error.what());
  } catch (const SourceFailure& failure) {
    open_.reset();
    DPIPE_THROW(StateError, "{}: cannot continue the archive the checkpoint was reading: {}", label(), failure.what());
  }
}

}  // namespace dpipe::io

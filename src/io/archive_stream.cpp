#include "io/archive_stream.hpp"

#include <algorithm>
#include <archive.h>
#include <archive_entry.h>
#include <clocale>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/decompress.hpp>

#include "io/filtered_source.hpp"
#include "io/gzip_source.hpp"
#include "io/hold_back.hpp"

namespace dpipe::io::detail {
namespace {

constexpr std::size_t kBlock = std::size_t{256} << 10;

/// libarchive converts a member's name from its header's charset to the calling thread's locale:
/// in the "C" locale of a program that never called setlocale, a zip name flagged UTF-8 that is not
/// ASCII cannot be converted and comes out NULL. While a Utf8Names lives, this thread uses the
/// C.UTF-8 locale, so names come out as UTF-8 bytes whatever the program's locale (the thread's
/// own locale is restored after). Where the system has no C.UTF-8 it changes nothing.
class Utf8Names {
 public:
  Utf8Names() noexcept : previous_(utf8() != locale_t{} ? ::uselocale(utf8()) : locale_t{}) {}
  Utf8Names(const Utf8Names&) = delete;
  Utf8Names& operator=(const Utf8Names&) = delete;
  ~Utf8Names() {
    if (previous_ != locale_t{}) ::uselocale(previous_);
  }

 private:
  static locale_t utf8() noexcept {
    static const locale_t locale = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t{});  // kept for the process
    return locale;
  }

  locale_t previous_;
};

}  // namespace

ArchiveStream::ArchiveStream(OpenedFile file, ArchiveKind kind, std::string_view node, ArchiveFilter filter,
                             std::string_view head)
    : file_(std::move(file)), node_(node), buffer_(std::max(kBlock, head.size())) {
  const std::string path = file_.path();
  pending_ = head.copy(buffer_.data(), head.size());
  if (kind == ArchiveKind::kTar) {
    pending_ = read_head(file_, buffer_, node);
    const std::string_view tar_head(buffer_.data(), pending_);
    std::unique_ptr<CheckedSource> decompressor;
    if (starts_as_gzip(tar_head))
      decompressor = std::make_unique<GzipSource>(std::move(file_), tar_head, node);
    else if (const auto tar_filter = filter_of_head(tar_head))
      decompressor = std::make_unique<FilteredSource>(std::move(file_), *tar_filter, node, tar_head);
    if (decompressor) {
      decompressed_ = std::make_unique<HoldBackSource>(std::move(decompressor), kDefaultHoldBack);
      pending_ = 0;
    }
  }
  const Utf8Names utf8_names;
  handle_ = archive_read_new();
  if (handle_ == nullptr) throw DataError(node, {.path = path}, "cannot start libarchive: out of memory");
  switch (kind) {
    case ArchiveKind::kCompressedStream:
      archive_read_support_filter_all(handle_);
      archive_read_support_format_raw(handle_);
      break;
    case ArchiveKind::kTar:
      archive_read_support_filter_all(handle_);
      archive_read_support_format_tar(handle_);
      archive_read_support_format_gnutar(handle_);
      break;
    case ArchiveKind::kZip:
      archive_read_support_format_zip_streamable(handle_);
      break;
  }
  if (archive_read_open(handle_, this, nullptr, &ArchiveStream::read_callback, nullptr) != ARCHIVE_OK) {
    try {
      fail();
    } catch (const SourceFailure& failure) {
      archive_read_free(handle_);
      throw DataError(node, {.path = path}, failure.what());
    } catch (...) {
      archive_read_free(handle_);
      throw;
    }
  }
  if (kind == ArchiveKind::kCompressedStream && archive_filter_code(handle_, 0) != filter.code) {
    archive_read_free(handle_);
    throw DataError(node, {.path = path}, fmt::format("not a {} stream", filter.name));
  }
}

ArchiveStream::~ArchiveStream() { archive_read_free(handle_); }

ssize_t ArchiveStream::read_callback(archive* /*handle*/, void* self, const void** buffer) {
  auto& stream = *static_cast<ArchiveStream*>(self);
  *buffer = stream.buffer_.data();
  if (stream.pending_ > 0) return static_cast<ssize_t>(std::exchange(stream.pending_, 0));
  try {
    if (stream.decompressed_)
      return static_cast<ssize_t>(stream.decompressed_->read(stream.buffer_.data(), stream.buffer_.size()));
    return static_cast<ssize_t>(stream.file_.read(stream.buffer_.data(), stream.buffer_.size(), stream.node_));
  } catch (...) {  // no exception crosses libarchive's C frames
    stream.file_error_ = std::current_exception();
    return -1;
  }
}

void ArchiveStream::fail(std::string_view context) {
  if (file_error_) std::rethrow_exception(std::exchange(file_error_, nullptr));
  const char* reason = archive_error_string(handle_);
  if (reason == nullptr)
    throw SourceFailure(context.empty() ? "libarchive failed without a reason" : std::string(context));
  throw SourceFailure(context.empty() ? std::string(reason) : fmt::format("{}: {}", context, reason));
}

bool ArchiveStream::next_member(ArchiveMember& member) {
  const Utf8Names utf8_names;
  member.name.clear();
  archive_entry* entry = nullptr;
  const int status = archive_read_next_header(handle_, &entry);
  if (status == ARCHIVE_EOF) return false;
  if (status != ARCHIVE_OK && status != ARCHIVE_WARN) fail();  // a damaged header (ARCHIVE_RETRY) or an error
  const char* name = archive_entry_pathname_utf8(entry);
  if (name == nullptr) name = archive_entry_pathname(entry);  // bytes that are not valid UTF-8
  if (name == nullptr) fail("the member's name cannot be read");
  member.name = name;
  if (status == ARCHIVE_WARN) fail();  // read, but with data lost or skipped
  if (member.name.empty()) throw SourceFailure("the member has no name");
  member.size = archive_entry_size_is_set(entry) != 0 ? static_cast<std::uint64_t>(archive_entry_size(entry)) : 0;
  member.regular = archive_entry_filetype(entry) == AE_IFREG;
  return true;
}

std::size_t ArchiveStream::read(char* data, std::size_t size) {
  const la_ssize_t got = archive_read_data(handle_, data, size);
  if (got < 0) fail();
  return static_cast<std::size_t>(got);
}

bool ArchiveStream::read_block(std::string_view& block, std::uint64_t& offset) {
  const void* data = nullptr;
  std::size_t size = 0;
  la_int64_t at = 0;
  const int status = archive_read_data_block(handle_, &data, &size, &at);
  if (status == ARCHIVE_EOF) return false;
  if (status != ARCHIVE_OK) fail();  // a zip member whose CRC32 or size does not match is a mere ARCHIVE_WARN
  block = {static_cast<const char*>(data), size};
  offset = static_cast<std::uint64_t>(at);
  return true;
}

std::optional<std::uint64_t> ArchiveStream::header_offset() const noexcept {
  const la_int64_t position = archive_read_header_position(handle_);  // ARCHIVE_FATAL after a fatal error
  if (position < 0) return std::nullopt;
  return static_cast<std::uint64_t>(position);
}

std::uint64_t ArchiveStream::consumed() const noexcept {
  return static_cast<std::uint64_t>(archive_filter_bytes(handle_, 0));
}

bool ArchiveStream::compressed() const noexcept {
  return decompressed_ != nullptr || archive_filter_code(handle_, 0) != ARCHIVE_FILTER_NONE;
}

}  // namespace dpipe::io::detail

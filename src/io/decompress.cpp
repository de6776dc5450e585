#include <archive.h>
#include <array>
#include <charconv>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/decompress.hpp>

#include "io/filtered_source.hpp"
#include "io/gzip_source.hpp"
#include "io/hold_back.hpp"
#include "io/opener_registry.hpp"

namespace dpipe::io {
namespace {

struct FormatInfo {
  Compression format;
  std::string_view name;
  int filter;  // libarchive's filter code
};

constexpr std::array<FormatInfo, 5> kFormats{{
    {Compression::kGzip, "gzip", ARCHIVE_FILTER_GZIP},
    {Compression::kBzip2, "bz2", ARCHIVE_FILTER_BZIP2},
    {Compression::kXz, "xz", ARCHIVE_FILTER_XZ},
    {Compression::kLzma, "lzma", ARCHIVE_FILTER_LZMA},
    {Compression::kZstd, "zstd", ARCHIVE_FILTER_ZSTD},
}};

const FormatInfo* info_of(Compression format) noexcept {
  for (const auto& info : kFormats)
    if (info.format == format) return &info;
  return nullptr;
}

/// The bytes of another source, refused beyond a limit (a decompression bomb).
class LimitedSource final : public ByteSource {
 public:
  LimitedSource(std::unique_ptr<ByteSource> inner, std::uint64_t max_bytes)
      : inner_(std::move(inner)), max_bytes_(max_bytes) {}

  std::size_t read(char* data, std::size_t size) override {
    const std::size_t got = inner_->read(data, size);
    produced_ += got;
    if (max_bytes_ != 0 && produced_ > max_bytes_)
      throw SourceFailure(fmt::format("decompresses to more than max_bytes ({}) bytes", max_bytes_));
    return got;
  }

 private:
  std::unique_ptr<ByteSource> inner_;
  std::uint64_t max_bytes_;
  std::uint64_t produced_ = 0;
};

/// The decompressor of `file` in `format`; DataError naming `node` when the file does not start as
/// `format` says.
std::unique_ptr<detail::CheckedSource> decompressor(OpenedFile file, const FormatInfo& info, std::string_view node) {
  if (info.format != Compression::kGzip)
    return std::make_unique<detail::FilteredSource>(std::move(file), detail::ArchiveFilter{info.filter, info.name},
                                                    node);
  std::vector<char> head(std::size_t{64} << 10);
  head.resize(detail::read_head(file, head, node));
  if (!detail::starts_as_gzip({head.data(), head.size()}))
    throw DataError(node, {.path = file.path()}, "not a gzip stream");
  return std::make_unique<detail::GzipSource>(std::move(file), std::string_view(head.data(), head.size()), node);
}

}  // namespace

std::string_view compression_name(Compression compression) noexcept {
  const auto* info = info_of(compression);
  return info != nullptr ? info->name : "detect";
}

std::optional<Compression> compression_of(std::string_view path) noexcept {
  static constexpr std::array<std::pair<std::string_view, Compression>, 7> kExtensions{{
      {".gz", Compression::kGzip},
      {".tgz", Compression::kGzip},
      {".bz2", Compression::kBzip2},
      {".xz", Compression::kXz},
      {".lzma", Compression::kLzma},
      {".zst", Compression::kZstd},
      {".zstd", Compression::kZstd},
  }};
  for (const auto& [extension, format] : kExtensions)
    if (path.ends_with(extension)) return format;
  return std::nullopt;
}

OpenedFile open_decompressed(OpenedFile file, Compression format, std::uint64_t max_bytes, std::string_view node,
                             std::uint64_t hold_back) {
  if (format == Compression::kDetect) {
    const auto detected = compression_of(file.path());
    if (!detected)
      throw DataError(node, {.path = file.path()},
                      "cannot tell the compression from the extension (.gz, .tgz, .bz2, .xz, .lzma, .zst, .zstd); "
                      "give it in the options");
    format = *detected;
  }
  const auto& info = *info_of(format);
  std::string path = file.path();
  std::string origin = hold_back == kDefaultHoldBack
                           ? fmt::format("{}[{}]:{}", info.name, max_bytes, file.origin())
                           : fmt::format("{}[{},{}]:{}", info.name, max_bytes, hold_back, file.origin());
  auto checked = std::make_unique<detail::HoldBackSource>(decompressor(std::move(file), info, node), hold_back);
  auto source = std::make_unique<LimitedSource>(std::move(checked), max_bytes);
  return {std::move(path), std::move(origin), std::move(source)};
}

namespace detail {

FilteredSource::FilteredSource(OpenedFile file, ArchiveFilter filter, std::string_view node, std::string_view head)
    : stream_(std::move(file), ArchiveKind::kCompressedStream, node, filter, head) {
  ArchiveMember member;
  if (!stream_.next_member(member)) at_end_ = true;  // an empty stream
}

std::optional<ArchiveFilter> filter_of_head(std::string_view head) noexcept {
  const auto starts = [head](std::string_view magic, std::size_t at = 0) {
    return head.size() >= at + magic.size() && head.substr(at, magic.size()) == magic;
  };
  const auto little_endian = [head](std::size_t at, std::size_t size) {
    std::uint64_t value = 0;
    for (std::size_t byte = size; byte-- > 0;) value = value << 8U | static_cast<unsigned char>(head[at + byte]);
    return value;
  };
  std::optional<Compression> format;
  if (starts("BZh") && head.size() > 3 && head[3] >= '1' && head[3] <= '9' &&
      (starts("1AY&SY", 4) || starts("\x17\x72\x45\x38\x50\x90", 4)))  // a block, or the end of an empty stream
    format = Compression::kBzip2;
  else if (starts({"\xfd\x37zXZ\0", 6}))
    format = Compression::kXz;
  else if (starts("\x28\xb5\x2f\xfd"))
    format = Compression::kZstd;
  else if (head.size() >= 13 && head[0] == '\x5d') {
    // lzma_alone: properties 0x5d, a dictionary of 2^n or 3 * 2^n bytes (4 KiB or more), and the
    // uncompressed size, unknown (all ones) or under 1 TiB
    const auto dictionary = little_endian(1, 4);
    const auto lowest = dictionary & (~dictionary + 1);
    const auto size = little_endian(5, 8);
    if (dictionary >= 4096 && (dictionary == lowest || dictionary == 3 * lowest) &&
        (size == ~std::uint64_t{0} || size < (std::uint64_t{1} << 40)))
      format = Compression::kLzma;
  }
  if (!format) return std::nullopt;
  const auto& info = *info_of(*format);
  return ArchiveFilter{info.filter, info.name};
}

void add_decompressed_openers(const AddOpener& add) {
  for (const auto& info : kFormats) {
    add(info.name, [&info](const std::string& origin, std::string_view node) {
      // "<format>[<max_bytes>]:<the compressed stream's origin>", or with ",<hold_back>" after
      // <max_bytes> where it is not kDefaultHoldBack
      const std::string_view text = origin;
      const auto settings_end = text.find("]:", info.name.size());
      if (text[info.name.size()] != '[' || settings_end == std::string_view::npos)
        throw malformed_origin(origin, info.name, node);
      const char* const end = text.data() + settings_end;
      std::uint64_t max_bytes = 0;
      std::uint64_t hold_back = kDefaultHoldBack;
      auto parsed = std::from_chars(text.data() + info.name.size() + 1, end, max_bytes);
      if (parsed.ec == std::errc{} && parsed.ptr != end && *parsed.ptr == ',')
        parsed = std::from_chars(parsed.ptr + 1, end, hold_back);
      if (parsed.ec != std::errc{} || parsed.ptr != end) throw malformed_origin(origin, info.name, node);
      auto inner = OpenedFile::reopen(std::string(text.substr(settings_end + 2)), 0, node);
      return open_decompressed(std::move(inner), info.format, max_bytes, node, hold_back);
    });
  }
}

}  // namespace detail

NodeSettings Decompressor::settings() const {
  return {{"format", std::string(compression_name(options_.format))},
          {"max_bytes", std::to_string(options_.max_bytes)},
          {"hold_back", std::to_string(options_.hold_back)}};
}

OpenedFile Decompressor::make(OpenedFile file) {
  return open_decompressed(std::move(file), options_.format, options_.max_bytes, label(), options_.hold_back);
}

}  // namespace dpipe::io

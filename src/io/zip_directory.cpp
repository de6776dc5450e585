#include "io/zip_directory.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include <dpipe/core/error.hpp>

#include "io/index_scan.hpp"

namespace dpipe::io::detail {
namespace {

// APPNOTE.TXT 4.3.7 (local header), 4.3.12 (central directory entry), 4.3.14-16 (end records),
// 4.5.3 (zip64 extra field).
constexpr std::string_view kLocalSignature{"PK\3\4", 4};
constexpr std::string_view kEntrySignature{"PK\1\2", 4};
constexpr std::string_view kEndSignature{"PK\5\6", 4};
constexpr std::string_view kZip64LocatorSignature{"PK\6\7", 4};
constexpr std::string_view kZip64EndSignature{"PK\6\6", 4};
constexpr std::size_t kLocalHeader = 30;
constexpr std::size_t kEntryHeader = 46;
constexpr std::size_t kEnd = 22;
constexpr std::size_t kZip64Locator = 20;
constexpr std::size_t kZip64End = 56;
constexpr std::size_t kMaxField = 0xffff;            // the longest name, extra field or comment
constexpr std::uint16_t kDataDescriptor = 1U << 3U;  // flag: CRC32 and sizes follow the data
constexpr std::uint16_t kZip64Extra = 0x0001;
constexpr std::uint32_t kIn64 = 0xffffffff;  // a 32-bit field whose value is in the zip64 extra field

/// Replaces each of `fields` that holds kIn64 with the next 8-byte value of the zip64 extra field
/// in `extra`, in order (APPNOTE 4.5.3); false when the field is missing or short.
bool read_zip64(std::string_view extra, std::initializer_list<std::uint64_t*> fields) {
  while (extra.size() >= 4) {
    const auto id = load16(extra.data());
    const std::size_t size = load16(extra.data() + 2);
    if (size > extra.size() - 4) return false;
    if (id == kZip64Extra) {
      std::string_view values = extra.substr(4, size);
      for (auto* field : fields) {
        if (*field != kIn64) continue;
        if (values.size() < 8) return false;
        *field = load64(values.data());
        values.remove_prefix(8);
      }
      return true;
    }
    extra.remove_prefix(4 + size);
  }
  return std::none_of(fields.begin(), fields.end(), [](const std::uint64_t* field) { return *field == kIn64; });
}

}  // namespace

ZipDirectory::ZipDirectory(std::string path, std::uint64_t from, std::string_view node)
    : path_(std::move(path)), node_(node) {
  do {
    descriptor_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  } while (descriptor_ < 0 && errno == EINTR);
  if (descriptor_ < 0) throw DataError(node_, {.path = path_}, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat status {};
  if (::fstat(descriptor_, &status) != 0) {
    const int error = errno;
    ::close(descriptor_);
    throw DataError(node_, {.path = path_}, fmt::format("cannot stat: {}", std::strerror(error)));
  }
  try {
    read_entries(static_cast<std::uint64_t>(status.st_size));
  } catch (...) {
    ::close(descriptor_);
    throw;
  }
  next_ = static_cast<std::size_t>(
      std::lower_bound(entries_.begin(), entries_.end(), from,
                       [](const Entry& entry, std::uint64_t offset) { return entry.offset < offset; }) -
      entries_.begin());
}

ZipDirectory::~ZipDirectory() { ::close(descriptor_); }

std::string ZipDirectory::read(std::uint64_t offset, std::size_t size) const {
  std::string bytes(size, '\0');
  if (read_at(descriptor_, bytes.data(), size, offset, path_, node_) < size)
    throw DataError(node_, {.path = path_, .byte_offset = offset}, "the zip ends inside a header");
  return bytes;
}

void ZipDirectory::read_entries(std::uint64_t file_size) {
  const auto damaged = [&](std::string_view why) {
    return DataError(node_, {.path = path_}, fmt::format("the zip's central directory cannot be read: {}", why));
  };
  // The end record is the last one in the file's tail that its comment's length fits.
  const std::size_t tail_size = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, kEnd + kMaxField));
  const std::uint64_t tail_start = file_size - tail_size;
  const std::string tail = read(tail_start, tail_size);
  std::size_t end = std::string::npos;
  for (std::size_t at = tail.rfind(kEndSignature); at != std::string::npos && end == std::string::npos;
       at = at == 0 ? std::string::npos : tail.rfind(kEndSignature, at - 1)) {
    if (at + kEnd <= tail.size() && at + kEnd + load16(tail.data() + at + 20) <= tail.size()) end = at;
  }
  if (end == std::string::npos)
    throw damaged("no end of central directory record (the file is truncated or not a zip)");
  const char* record = tail.data() + end;
  std::uint64_t count = load16(record + 10);
  std::uint64_t directory_size = load32(record + 12);
  std::uint64_t directory_offset = load32(record + 16);
  std::uint64_t directory_end = tail_start + end;  // where the directory ends in the file
  if (end >= kZip64Locator && tail.compare(end - kZip64Locator, 4, kZip64LocatorSignature) == 0) {
    const std::uint64_t zip64_end = load64(tail.data() + end - kZip64Locator + 8);
    const std::string zip64 = read(zip64_end, kZip64End);
    if (zip64.compare(0, 4, kZip64EndSignature) != 0) throw damaged("no zip64 end record where its locator says");
    count = load64(zip64.data() + 32);
    directory_size = load64(zip64.data() + 40);
    directory_offset = load64(zip64.data() + 48);
    directory_end = zip64_end;
  }
  // Offsets count from the zip's start; bytes before it (a self-extractor's) shift them.
  if (directory_size > directory_end || directory_end - directory_size < directory_offset)
    throw damaged("its size and offset do not fit before its end record");
  const std::uint64_t shift = directory_end - directory_size - directory_offset;
  const std::string directory = read(directory_offset + shift, static_cast<std::size_t>(directory_size));
  std::string_view rest = directory;
  while (!rest.empty()) {
    if (rest.size() < kEntryHeader || rest.substr(0, 4) != kEntrySignature)
      throw damaged(fmt::format("entry {} is not a central directory entry", entries_.size()));
    const std::size_t name_size = load16(rest.data() + 28);
    const std::size_t extra_size = load16(rest.data() + 30);
    const std::size_t comment_size = load16(rest.data() + 32);
    if (rest.size() < kEntryHeader + name_size + extra_size + comment_size)
      throw damaged(fmt::format("entry {} runs past the directory's end", entries_.size()));
    Entry entry;
    entry.flags = load16(rest.data() + 8);
    entry.crc = load32(rest.data() + 16);
    entry.compressed = load32(rest.data() + 20);
    entry.size = load32(rest.data() + 24);
    entry.offset = load32(rest.data() + 42);
    entry.name.assign(rest.substr(kEntryHeader, name_size));
    if (!read_zip64(rest.substr(kEntryHeader + name_size, extra_size), {&entry.size, &entry.compressed, &entry.offset}))
      throw damaged(fmt::format("the zip64 field of entry {} is missing or short", entries_.size()));
    entry.offset += shift;
    entries_.push_back(std::move(entry));
    rest.remove_prefix(kEntryHeader + name_size + extra_size + comment_size);
  }
  if (entries_.size() != count)
    throw damaged(fmt::format("it holds {} entries, its end record says {}", entries_.size(), count));
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.offset < b.offset; });
}

std::uint64_t ZipDirectory::check_next(std::uint64_t header_end) {
  if (next_ == entries_.size()) {
    throw DataError(node_, {.path = path_},
                    fmt::format("the local header that ends at byte {} is not in the central directory", header_end));
  }
  const Entry& entry = entries_[next_];
  const auto mismatch = [&](std::string_view why) {
    return DataError(node_, {.path = path_, .member = entry.name, .byte_offset = entry.offset}, why);
  };
  // One read where the local header is where the stream's ended, as it is but for a mismatch.
  const std::size_t guess =
      header_end > entry.offset + kLocalHeader
          ? static_cast<std::size_t>(std::min<std::uint64_t>(header_end - entry.offset, kLocalHeader + 2 * kMaxField))
          : kLocalHeader;
  std::string header(guess, '\0');
  header.resize(read_at(descriptor_, header.data(), header.size(), entry.offset, path_, node_));
  if (header.size() < kLocalHeader || header.compare(0, 4, kLocalSignature) != 0)
    throw mismatch("no local header where the central directory puts this member");
  const std::size_t name_size = load16(header.data() + 26);
  const std::size_t extra_size = load16(header.data() + 28);
  const std::uint64_t own_end = entry.offset + kLocalHeader + name_size + extra_size;
  if (header_end < own_end) {
    throw mismatch(fmt::format(
        "a local header that is not in the central directory comes before this member's (it ends at byte {})",
        header_end));
  }
  if (header_end > own_end)
    throw mismatch(
        fmt::format("the stream passed over this member's local header to one that ends at byte {}", header_end));
  if (header.size() < own_end - entry.offset)
    throw DataError(node_, {.path = path_, .byte_offset = entry.offset}, "the zip ends inside a header");
  const std::string_view name = std::string_view(header).substr(kLocalHeader, name_size);
  if (name != entry.name) throw mismatch(fmt::format("its local header names it '{}'", name));
  const auto flags = load16(header.data() + 6);
  if ((flags & kDataDescriptor) == 0) {  // else the local header holds zeros, the descriptor the values
    const std::uint32_t crc = load32(header.data() + 14);
    std::uint64_t compressed = load32(header.data() + 18);
    std::uint64_t size = load32(header.data() + 22);
    if (!read_zip64(std::string_view(header).substr(kLocalHeader + name_size), {&size, &compressed}))
      throw mismatch("the zip64 field of its local header is missing or short");
    if (crc != entry.crc)
      throw mismatch(
          fmt::format("its local header gives CRC32 {:#010x}, the central directory {:#010x}", crc, entry.crc));
    if (compressed != entry.compressed)
      throw mismatch(fmt::format("its local header gives {} compressed bytes, the central directory {}", compressed,
                                 entry.compressed));
    if (size != entry.size)
      throw mismatch(fmt::format("its local header gives {} bytes, the central directory {}", size, entry.size));
  }
  ++next_;
  return entry.offset;
}

void ZipDirectory::check_end() const {
  if (next_ == entries_.size()) return;
  const Entry& entry = entries_[next_];
  throw DataError(node_, {.path = path_, .member = entry.name, .byte_offset = entry.offset},
                  "the stream ended before this member, which the central directory lists");
}

}  // namespace dpipe::io::detail

#include "io/index_scan.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>

#include <dpipe/core/error.hpp>
#include <dpipe/io/detail/csv_cursor.hpp>

#include "io/crc32c.hpp"
#include "io/csv_scan.hpp"

namespace dpipe::io::detail {
namespace {

constexpr std::size_t kScanBlock = std::size_t{1} << 20;
constexpr std::size_t kTarBlock = 512;

/// The bytes of a file by offset, in blocks of kScanBlock or more read with pread; no allocation
/// once the buffer has grown to the largest block.
class ScanBuffer {
 public:
  ScanBuffer(int descriptor, std::uint64_t size, std::string_view path, std::string_view node)
      : descriptor_(descriptor), size_(size), path_(path), node_(node) {
    ::posix_fadvise(descriptor, 0, 0, POSIX_FADV_SEQUENTIAL);
  }

  /// Bytes [offset, offset + count) of the file, which lie within its size: from the buffer, or
  /// from a block read at `offset`.
  const char* at(std::uint64_t offset, std::size_t count) {
    if (offset >= begin_ && offset - begin_ + count <= length_) return buffer_.get() + (offset - begin_);
    const auto wanted = static_cast<std::size_t>(std::min<std::uint64_t>(std::max(count, kScanBlock), size_ - offset));
    if (capacity_ < wanted) {
      buffer_ = std::make_unique_for_overwrite<char[]>(wanted);
      capacity_ = wanted;
    }
    length_ = read_at(descriptor_, buffer_.get(), wanted, offset, path_, node_);
    begin_ = offset;
    if (length_ < count)
      throw DataError(node_, {.path = std::string(path_), .byte_offset = offset + length_},
                      "the file became shorter while it was indexed");
    return buffer_.get();
  }

 private:
  int descriptor_;
  std::uint64_t size_;
  std::string_view path_;
  std::string_view node_;
  std::unique_ptr<char[]> buffer_;
  std::size_t capacity_ = 0;
  std::uint64_t begin_ = 0;  // the file offset of buffer_[0]
  std::size_t length_ = 0;   // the bytes buffer_ holds
};

// --- TFRecord ---------------------------------------------------------------------------------

void scan_tfrecord(ScanBuffer& in, std::uint64_t size, RecordIndex& index, std::string_view node) {
  constexpr std::uint64_t kFraming = kTFRecordHeader + kTFRecordFooter;
  std::uint64_t offset = 0;
  for (std::uint64_t number = 1; offset < size; ++number) {
    const auto fail = [&](std::string_view reason) {
      return DataError(node, {.path = index.path, .byte_offset = offset}, fmt::format("record {}: {}", number, reason));
    };
    const std::uint64_t left = size - offset;
    if (left < kTFRecordHeader)
      throw fail(fmt::format("the file ends inside the record's header ({} of {} bytes)", left, kTFRecordHeader));
    const char* header = in.at(offset, kTFRecordHeader);
    const std::uint64_t length = load64(header);
    const std::uint32_t stored = load32(header + 8);
    const std::uint32_t computed = crc32c_mask(crc32c(header, 8));
    if (stored != computed)
      throw fail(fmt::format("the length's CRC does not match (stored {:#010x}, computed {:#010x})", stored, computed));
    if (left < kFraming || length > left - kFraming)
      throw fail(fmt::format("the file ends after {} of the record's {} bytes", left, length + kFraming));
    index.spans.push_back({offset, length + kFraming});
    offset += length + kFraming;
  }
}

// --- lines ------------------------------------------------------------------------------------

/// Whether [from, to) holds a byte other than JSON whitespace (looks at the first such byte only).
bool holds_text(const char* from, const char* to) noexcept {
  for (; from != to; ++from) {
    const char c = *from;
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return true;
  }
  return false;
}

void scan_lines(ScanBuffer& in, std::uint64_t size, RecordIndex& index) {
  std::uint64_t start = 0;  // where the current line starts
  bool text = false;        // the current line holds text in the blocks before this one
  for (std::uint64_t offset = 0; offset < size;) {
    const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(kScanBlock, size - offset));
    const char* const block = in.at(offset, count);
    const char* const end = block + count;
    for (const char* at = block; at != end;) {
      const auto* newline = static_cast<const char*>(std::memchr(at, '\n', static_cast<std::size_t>(end - at)));
      const char* stop = newline != nullptr ? newline : end;
      text = text || holds_text(at, stop);
      if (newline == nullptr) break;
      const std::uint64_t next = offset + static_cast<std::uint64_t>(newline - block) + 1;
      if (!text) index.blank.push_back(index.spans.size());
      index.spans.push_back({start, next - start});
      start = next;
      text = false;
      at = newline + 1;
    }
    offset += count;
  }
  if (start < size) {  // the last line, without a newline
    if (!text) index.blank.push_back(index.spans.size());
    index.spans.push_back({start, size - start});
  }
}

// --- CSV --------------------------------------------------------------------------------------

/// Finds where CSV rows end, block after block, with the rules of CsvCursor (Python's excel
/// dialect): a row ends at "\n", "\r\n" or "\r" outside quotes; a quote opens a quoted field only
/// at the start of a field. Most bytes are passed over by scan(); only quotes and line ends are
/// looked at.
class CsvScan {
 public:
  CsvScan(const RecordIndex& index, std::string_view node)
      : index_(index),
        node_(node),
        delimiter_(index.spec.delimiter),
        quote_(index.spec.quotechar),
        unquoted_(stops_at('\n', '\r', index.spec.quotechar)),
        quoted_(stops_at(index.spec.quotechar, '\n', '\r')),
        skip_(index.spec.skip_lines),
        state_(skip_ > 0 ? State::kSkip : State::kUnquoted) {}

  void block(const char* data, std::size_t count, std::uint64_t offset, std::vector<RecordSpan>& spans) {
    const char* const end = data + count;
    const auto at_offset = [&](const char* p) { return offset + static_cast<std::uint64_t>(p - data); };
    for (const char* at = data; at != end;) {
      switch (state_) {
        case State::kSkip: {
          if (skip_ == 0) {
            state_ = State::kUnquoted;
            row_ = at_offset(at);
            break;
          }
          const char* stop = scan(at, end, kLineEnds);
          if (stop == end) {
            at = end;
            break;
          }
          --skip_;
          ++lines_;
          if (*stop == '\r') state_ = State::kSkipAfterCr;
          at = stop + 1;
          break;
        }
        case State::kSkipAfterCr:
          if (*at == '\n') ++at;  // "\r\n" is one line end
          state_ = State::kSkip;
          break;
        case State::kUnquoted: {
          const char* stop = scan(at, end, unquoted_);
          if (stop == end) {
            at = end;
            break;
          }
          if (*stop == quote_) {
            // A quote opens a quoted field at the start of a field; elsewhere it is a plain byte.
            const char before = stop != data ? stop[-1] : last_;
            if (at_offset(stop) == row_ || before == delimiter_) state_ = State::kQuoted;
            at = stop + 1;
            break;
          }
          ++lines_;
          if (*stop == '\r') {
            cr_ = at_offset(stop);
            state_ = State::kAfterCr;
          } else {
            end_row(at_offset(stop) + 1, spans);
          }
          at = stop + 1;
          break;
        }
        case State::kAfterCr: {
          std::uint64_t row_end = cr_ + 1;
          if (*at == '\n') {  // "\r\n" is one line end
            ++at;
            ++row_end;
          }
          end_row(row_end, spans);
          state_ = State::kUnquoted;
          break;
        }
        case State::kQuoted: {
          const char* stop = scan(at, end, quoted_);
          if (stop == end) {
            at = end;
            break;
          }
          if (*stop != quote_)
            throw error(
                "a quoted field of this row holds a line end: a CSV file with multi-line rows cannot be indexed");
          state_ = State::kQuoteInQuoted;
          at = stop + 1;
          break;
        }
        case State::kQuoteInQuoted:
          if (*at == quote_) {  // a doubled quote stands for one
            state_ = State::kQuoted;
            ++at;
          } else {  // the quotes are closed; the byte is read again outside them
            state_ = State::kUnquoted;
          }
          break;
      }
    }
    if (count > 0) last_ = end[-1];
  }

  /// Ends the scan at the end of the file (`size` bytes).
  void finish(std::uint64_t size, std::vector<RecordSpan>& spans) {
    switch (state_) {
      case State::kSkip:
      case State::kSkipAfterCr:
        return;
      case State::kAfterCr:
        end_row(cr_ + 1, spans);
        return;
      case State::kQuoted:
        throw error("a quoted field of this row never ends (the file ends inside its quotes)");
      case State::kUnquoted:
      case State::kQuoteInQuoted:
        if (row_ < size) end_row(size, spans);
        return;
    }
  }

 private:
  enum class State : std::uint8_t {
    kSkip,           // skipping the lines before the first row
    kSkipAfterCr,    // a skipped line ended with '\r': a '\n' after it belongs to it
    kUnquoted,       // in a row, outside quotes
    kAfterCr,        // a row ended with '\r': a '\n' after it belongs to it
    kQuoted,         // inside the quotes of a quoted field
    kQuoteInQuoted,  // a quote inside quotes: it closes them, or a second one follows
  };

  void end_row(std::uint64_t end, std::vector<RecordSpan>& spans) {
    spans.push_back({row_, end - row_});
    row_ = end;
  }

  [[nodiscard]] DataError error(std::string_view reason) const {
    return {node_, {.path = index_.path, .line = lines_ + 1, .byte_offset = row_}, reason};
  }

  const RecordIndex& index_;
  std::string_view node_;
  char delimiter_;
  char quote_;
  CsvStops unquoted_;
  CsvStops quoted_;
  std::uint64_t skip_;  // lines still to skip
  State state_;
  std::uint64_t row_ = 0;    // where the current row starts
  std::uint64_t cr_ = 0;     // where the '\r' that ended it is (kAfterCr)
  std::uint64_t lines_ = 0;  // the line ends before the current row
  char last_ = '\0';         // the last byte of the block before
};

void scan_csv(ScanBuffer& in, std::uint64_t size, RecordIndex& index, std::string_view node) {
  CsvScan csv(index, node);
  for (std::uint64_t offset = 0; offset < size;) {
    const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(kScanBlock, size - offset));
    csv.block(in.at(offset, count), count, offset, index.spans);
    offset += count;
  }
  csv.finish(size, index.spans);
}

// --- tar --------------------------------------------------------------------------------------

/// A tar header's text field: up to its first NUL.
std::string_view tar_text(const char* field, std::size_t size) noexcept {
  const auto* nul = static_cast<const char*>(std::memchr(field, '\0', size));
  return {field, nul != nullptr ? static_cast<std::size_t>(nul - field) : size};
}

/// A tar header's number: octal after optional spaces, or base-256 (GNU) when its first byte has
/// the high bit set; std::nullopt for a negative or too large base-256 number.
std::optional<std::uint64_t> tar_number(const char* field, std::size_t size) noexcept {
  const auto first = static_cast<unsigned char>(field[0]);
  if ((first & 0x80U) != 0) {
    if (first != 0x80U) return std::nullopt;
    std::uint64_t value = 0;
    for (std::size_t i = 1; i < size; ++i) {
      if ((value >> 56) != 0) return std::nullopt;
      value = (value << 8) | static_cast<unsigned char>(field[i]);
    }
    return value;
  }
  std::size_t i = 0;
  while (i < size && (field[i] == ' ' || field[i] == '\t')) ++i;
  std::uint64_t value = 0;
  for (; i < size && field[i] >= '0' && field[i] <= '7'; ++i)
    value = value * 8 + static_cast<std::uint64_t>(field[i] - '0');
  return value;
}

/// Whether the header's checksum field matches its bytes (summed unsigned or signed, as tars
/// have been written both ways).
bool tar_checksum_matches(const char* header) noexcept {
  const auto stored = tar_number(header + 148, 8);
  std::int64_t unsigned_sum = 0;
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < kTarBlock; ++i) {
    const char c = i >= 148 && i < 156 ? ' ' : header[i];
    unsigned_sum += static_cast<unsigned char>(c);
    signed_sum += static_cast<signed char>(c);
  }
  return stored &&
         (static_cast<std::int64_t>(*stored) == unsigned_sum || static_cast<std::int64_t>(*stored) == signed_sum);
}

/// The compressor whose magic bytes start `bytes`, or "".
std::string_view compression_magic(std::string_view bytes) noexcept {
  if (bytes.starts_with("\x1f\x8b")) return "gzip";
  if (bytes.starts_with("BZh")) return "bzip2";
  if (bytes.starts_with(std::string_view("\xfd"
                                         "7zXZ\0",
                                         6)))
    return "xz";
  if (bytes.starts_with("\x28\xb5\x2f\xfd")) return "zstd";
  if (bytes.starts_with(std::string_view("\x5d\0\0", 3))) return "lzma";
  return "";
}

/// What the extended headers before a member say about it.
struct TarExtensions {
  std::optional<std::string> path;    // pax "path", or a GNU long name
  std::optional<std::uint64_t> size;  // pax "size"
  bool sparse = false;                // pax GNU.sparse.*
};

/// Reads the records of a pax extended header ("<length> <key>=<value>\n"); false when they are
/// malformed.
bool read_pax(std::string_view data, TarExtensions& extensions) {
  while (!data.empty() && data.front() != '\0') {
    const auto space = data.find(' ');
    if (space == std::string_view::npos || space == 0) return false;
    std::uint64_t length = 0;
    for (const char c : data.substr(0, space)) {
      if (c < '0' || c > '9' || length > data.size()) return false;
      length = length * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (length <= space + 1 || length > data.size() || data[length - 1] != '\n') return false;
    const std::string_view record = data.substr(space + 1, length - space - 2);
    data.remove_prefix(length);
    const auto equals = record.find('=');
    if (equals == std::string_view::npos) return false;
    const std::string_view key = record.substr(0, equals);
    const std::string_view value = record.substr(equals + 1);
    if (key == "path") {
      extensions.path = std::string(value);
    } else if (key == "size") {
      std::uint64_t size = 0;
      for (const char c : value) {
        if (c < '0' || c > '9') return false;
        size = size * 10 + static_cast<std::uint64_t>(c - '0');
      }
      extensions.size = size;
    } else if (key.starts_with("GNU.sparse.")) {
      extensions.sparse = true;
    }
  }
  return true;
}

void scan_tar(ScanBuffer& in, std::uint64_t size, RecordIndex& index, std::string_view node) {
  TarExtensions extensions;
  std::uint64_t offset = 0;
  for (;;) {
    const auto fail = [&](std::string_view member, std::string_view reason) {
      return DataError(node, {.path = index.path, .member = std::string(member), .byte_offset = offset}, reason);
    };
    const std::uint64_t left = size - offset;
    if (left == 0) return;  // an archive without its end blocks
    if (offset == 0) {      // a compressed tar: its magic bytes, where no tar header is
      const auto head = static_cast<std::size_t>(std::min<std::uint64_t>(left, kTarBlock));
      const char* start = in.at(0, head);
      const auto compressor = compression_magic({start, head});
      if (!compressor.empty() && (head < kTarBlock || !tar_checksum_matches(start)))
        throw fail("", fmt::format("the archive is compressed ({}): a compressed tar cannot be indexed; decompress "
                                   "it first, or read it with load_from_tar",
                                   compressor));
    }
    if (left < kTarBlock)
      throw fail("", fmt::format("the file ends inside a tar header ({} of {} bytes)", left, kTarBlock));
    const char* header = in.at(offset, kTarBlock);
    if (std::all_of(header, header + kTarBlock, [](char c) { return c == '\0'; })) return;  // the end blocks
    if (!tar_checksum_matches(header))
      throw fail("", "the tar header's checksum does not match: the file is not a tar archive, or it is damaged");
    const char type = header[156];
    std::string_view name = tar_text(header, 100);
    std::string joined;
    if (extensions.path) {
      name = *extensions.path;
    } else if (std::memcmp(header + 257, "ustar\0", 6) == 0 && header[345] != '\0') {  // POSIX: a prefix
      joined = std::string(tar_text(header + 345, 155)) + "/" + std::string(name);
      name = joined;
    }
    const auto header_size = tar_number(header + 124, 12);
    if (!header_size) throw fail(name, "the member's size field is not a size");
    const std::uint64_t data_size = extensions.size.value_or(*header_size);
    const std::uint64_t data = offset + kTarBlock;
    if (data_size > size - data)
      throw fail(name,
                 fmt::format("the archive ends inside the member's {} bytes (a truncated tar archive)", data_size));
    const std::uint64_t next = data + (data_size + kTarBlock - 1) / kTarBlock * kTarBlock;
    switch (type) {
      case 'L':  // a GNU long name: the next member's
        extensions.path = std::string(
            tar_text(in.at(data, static_cast<std::size_t>(data_size)), static_cast<std::size_t>(data_size)));
        offset = next;
        continue;
      case 'x':  // a pax header: the next member's path and size
        if (!read_pax({in.at(data, static_cast<std::size_t>(data_size)), static_cast<std::size_t>(data_size)},
                      extensions))
          throw fail("", "the member's pax header is malformed");
        offset = next;
        continue;
      case 'K':  // a GNU long link name, a global pax header: nothing an index needs
      case 'g':
        offset = next;
        continue;
      case '0':
      case '\0':
      case '7':  // a regular (or contiguous) file; a name ending in '/' is an old tar's directory
        if (extensions.sparse) throw fail(name, "the member is a sparse file, which cannot be indexed");
        if (!name.empty() && name.back() != '/') {
          index.spans.push_back({data, data_size});
          index.names.append(name);
          index.name_ends.push_back(index.names.size());
        }
        break;
      case '1':
        throw fail(name, "the member is a hard link, which cannot be indexed");
      case 'S':
        throw fail(name, "the member is a sparse file, which cannot be indexed");
      case '2':  // links, devices, directories, FIFOs: passed over, as load_from_tar does
      case '3':
      case '4':
      case '5':
      case '6':
        break;
      default:
        throw fail(name, fmt::format("the member has tar type '{}', which cannot be indexed", type));
    }
    extensions = {};
    offset = next;
  }
}

}  // namespace

std::size_t read_at(int descriptor, char* data, std::size_t size, std::uint64_t offset, std::string_view path,
                    std::string_view node) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(descriptor, data + done, size - done, static_cast<off_t>(offset + done));
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      throw DataError(node, {.path = std::string(path), .byte_offset = offset + done},
                      fmt::format("cannot read: {}", std::strerror(errno)));
    }
    done += static_cast<std::size_t>(got);
  }
  return done;
}

void scan_records(int descriptor, std::uint64_t size, RecordIndex& index, std::string_view node) {
  ScanBuffer in(descriptor, size, index.path, node);
  switch (index.spec.kind) {
    case IndexKind::kTFRecord:
      scan_tfrecord(in, size, index, node);
      return;
    case IndexKind::kLines:
      scan_lines(in, size, index);
      return;
    case IndexKind::kCsv:
      scan_csv(in, size, index, node);
      return;
    case IndexKind::kTar:
      scan_tar(in, size, index, node);
      return;
  }
  DPIPE_THROW(InvalidArgument, "{}: unknown index kind {}", node, static_cast<std::uint32_t>(index.spec.kind));
}

}  // namespace dpipe::io::detail

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/io/detail/record_cursor.hpp>
#include <dpipe/io/tfrecord.hpp>

#include "io/crc32c.hpp"

namespace dpipe::io::detail {
namespace {

constexpr std::size_t kBlock = std::size_t{64} << 10;    // the least a buffered read asks for
constexpr std::size_t kBuffer = std::size_t{256} << 10;  // records up to kBuffer - kBlock stay in it
constexpr std::size_t kHeader = 12;                      // length (8) and its masked CRC (4)
constexpr std::size_t kFooter = 4;                       // the data's masked CRC

std::uint32_t load32(const char* p) noexcept {
  std::uint32_t value = 0;
  std::memcpy(&value, p, sizeof value);
  return value;  // TFRecord is little-endian, as the machines dpipe runs on
}

std::uint64_t load64(const char* p) noexcept {
  std::uint64_t value = 0;
  std::memcpy(&value, p, sizeof value);
  return value;
}

// --- protobuf wire format -------------------------------------------------------------------

/// What is wrong with an Example's bytes.
class Malformed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum WireType : std::uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5
};

/// Reads the fields of one message, front to back.
class Fields {
 public:
  Fields(std::string_view bytes, std::string_view message) noexcept
      : p_(bytes.data()), end_(bytes.data() + bytes.size()), message_(message) {}

  /// Reads the next tag into field_ and wire_; false at the end of the message.
  bool next() {
    if (p_ == end_) return false;
    const std::uint64_t tag = varint();
    field_ = tag >> 3;
    wire_ = static_cast<std::uint32_t>(tag & 7U);
    if (field_ == 0) throw Malformed(fmt::format("the {} has a field number 0", message_));
    if (wire_ > kFixed32)
      throw Malformed(
          fmt::format("field {} of the {} has wire type {}, which does not exist", field_, message_, wire_));
    return true;
  }
  /// Whether bytes are left.
  [[nodiscard]] bool more() const noexcept { return p_ != end_; }
  [[nodiscard]] std::uint64_t field() const noexcept { return field_; }
  [[nodiscard]] std::uint32_t wire() const noexcept { return wire_; }

  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ == end_) throw Malformed(fmt::format("a varint runs past the end of the {}", message_));
      const auto byte = static_cast<unsigned char>(*p_++);
      value |= static_cast<std::uint64_t>(byte & 0x7fU) << shift;
      if ((byte & 0x80U) == 0) return value;
    }
    throw Malformed(fmt::format("a varint in the {} is longer than 10 bytes", message_));
  }

  std::string_view take(std::uint64_t size) {
    if (size > static_cast<std::uint64_t>(end_ - p_))
      throw Malformed(
          fmt::format("field {} of the {} is {} bytes long, but only {} are left", field_, message_, size, end_ - p_));
    const std::string_view bytes(p_, static_cast<std::size_t>(size));
    p_ += size;
    return bytes;
  }
  std::string_view delimited() { return take(varint()); }

  /// Skips the value of the field just read, whatever its wire type (unknown fields).
  void skip(int depth = 0) {
    switch (wire_) {
      case kVarint:
        (void)varint();
        break;
      case kFixed64:
        (void)take(8);
        break;
      case kDelimited:
        (void)delimited();
        break;
      case kFixed32:
        (void)take(4);
        break;
      case kStartGroup: {
        if (depth == 64) throw Malformed(fmt::format("the {} nests groups more than 64 deep", message_));
        const std::uint64_t group = field_;
        for (;;) {
          if (!next()) throw Malformed(fmt::format("group {} of the {} has no end", group, message_));
          if (wire_ == kEndGroup) {
            if (field_ != group)
              throw Malformed(fmt::format("group {} of the {} ends with field {}", group, message_, field_));
            return;
          }
          skip(depth + 1);
        }
      }
      default:
        throw Malformed(fmt::format("the {} ends group {}, which it did not start", message_, field_));
    }
  }

 private:
  const char* p_;
  const char* end_;
  std::string_view message_;
  std::uint64_t field_ = 0;
  std::uint32_t wire_ = 0;
};

void decode_bytes_list(std::string_view bytes, BytesList& list) {
  Fields fields(bytes, "BytesList");
  while (fields.next()) {
    if (fields.field() == 1 && fields.wire() == kDelimited) {
      list.emplace_back(fields.delimited());
    } else {
      fields.skip();
    }
  }
}

void decode_float_list(std::string_view bytes, FloatList& list) {
  Fields fields(bytes, "FloatList");
  while (fields.next()) {
    if (fields.field() == 1 && fields.wire() == kDelimited) {  // packed
      const std::string_view packed = fields.delimited();
      if (packed.size() % 4 != 0)
        throw Malformed(
            fmt::format("the packed values of a FloatList are {} bytes, not a multiple of 4", packed.size()));
      const std::size_t old = list.size();
      list.resize(old + packed.size() / 4);
      if (!packed.empty()) std::memcpy(list.data() + old, packed.data(), packed.size());
    } else if (fields.field() == 1 && fields.wire() == kFixed32) {
      float value = 0;
      std::memcpy(&value, fields.take(4).data(), sizeof value);
      list.push_back(value);
    } else {
      fields.skip();
    }
  }
}

void decode_int64_list(std::string_view bytes, Int64List& list) {
  Fields fields(bytes, "Int64List");
  while (fields.next()) {
    if (fields.field() == 1 && fields.wire() == kDelimited) {  // packed
      const std::string_view packed = fields.delimited();
      // Each varint ends with the one byte of it that is below 0x80.
      list.reserve(list.size() + static_cast<std::size_t>(std::count_if(packed.begin(), packed.end(),
                                                                        [](char c) { return (c & 0x80) == 0; })));
      Fields values(packed, "Int64List");
      while (values.more()) list.push_back(static_cast<std::int64_t>(values.varint()));
    } else if (fields.field() == 1 && fields.wire() == kVarint) {
      list.push_back(static_cast<std::int64_t>(fields.varint()));
    } else {
      fields.skip();
    }
  }
}

/// Merges one encoding of a Feature into `feature`: a list of another kind replaces it, a list of
/// the same kind appends to it (protobuf's merge of a oneof).
void decode_feature(std::string_view bytes, Feature& feature) {
  Fields fields(bytes, "Feature");
  while (fields.next()) {
    if (fields.wire() != kDelimited || fields.field() < 1 || fields.field() > 3) {
      fields.skip();
      continue;
    }
    const std::string_view list = fields.delimited();
    switch (fields.field()) {
      case 1:
        if (!std::holds_alternative<BytesList>(feature)) feature.emplace<BytesList>();
        decode_bytes_list(list, std::get<BytesList>(feature));
        break;
      case 2:
        if (!std::holds_alternative<FloatList>(feature)) feature.emplace<FloatList>();
        decode_float_list(list, std::get<FloatList>(feature));
        break;
      default:
        if (!std::holds_alternative<Int64List>(feature)) feature.emplace<Int64List>();
        decode_int64_list(list, std::get<Int64List>(feature));
        break;
    }
  }
}

void decode_entry(std::string_view bytes, TFExample& example) {
  Fields fields(bytes, "Features entry");
  std::string key;
  Feature feature;
  while (fields.next()) {
    if (fields.field() == 1 && fields.wire() == kDelimited) {
      key.assign(fields.delimited());
    } else if (fields.field() == 2 && fields.wire() == kDelimited) {
      decode_feature(fields.delimited(), feature);
    } else {
      fields.skip();
    }
  }
  example.insert_or_assign(std::move(key), std::move(feature));  // a map's last entry wins
}

void decode_features(std::string_view bytes, TFExample& example) {
  Fields fields(bytes, "Features");
  while (fields.next()) {
    if (fields.field() == 1 && fields.wire() == kDelimited) {
      decode_entry(fields.delimited(), example);
    } else {
      fields.skip();
    }
  }
}

}  // namespace

std::optional<std::string> decode_example(std::string_view bytes, TFExample& example) {
  example.clear();
  try {
    Fields fields(bytes, "Example");
    while (fields.next()) {
      if (fields.field() == 1 && fields.wire() == kDelimited) {
        decode_features(fields.delimited(), example);
      } else {
        fields.skip();
      }
    }
    return std::nullopt;
  } catch (const Malformed& malformed) {
    example.clear();
    return std::string(malformed.what());
  }
}

// --- framing --------------------------------------------------------------------------------

void RecordCursor::start(OpenedFile file) {
  FileCursor::start(std::move(file));
  at_offset_ = file_->offset();
}

void RecordCursor::close() noexcept {
  FileCursor::close();
  scratch_ = std::string();
}

bool RecordCursor::ensure(std::size_t count, std::string_view node) {
  if (buffer_.size() < kBuffer) buffer_.resize(kBuffer);
  while (end_ - begin_ < count) {
    if (read_more(node, kBlock) == 0) return false;
  }
  return true;
}

DataError RecordCursor::record_error(std::string_view reason, std::string_view node) const {
  return DataError(node, {.path = file_->path(), .byte_offset = at_offset_},
                   fmt::format("record {}: {}", count_, reason));
}

DataError RecordCursor::framing_error(std::string_view reason, std::string_view node) {
  DataError error = record_error(reason, node);
  close();
  return error;
}

bool RecordCursor::next(std::string_view& record, std::string* owned, std::string_view node) {
  at_offset_ = next_offset();
  ++count_;
  if (!ensure(kHeader, node)) {
    if (end_ == begin_) {
      close();
      return false;
    }
    throw framing_error(
        fmt::format("the file ends inside the record's header ({} of {} bytes)", end_ - begin_, kHeader), node);
  }
  const char* header = buffer_.data() + begin_;
  const std::uint64_t length = load64(header);
  if (rules_.verify_crc) {
    const std::uint32_t stored = load32(header + 8);
    const std::uint32_t computed = crc32c_mask(crc32c(header, 8));
    if (stored != computed)
      throw framing_error(
          fmt::format("the length's CRC does not match (stored {:#010x}, computed {:#010x})", stored, computed), node);
  }
  if (length > rules_.max_record_bytes)
    throw framing_error(
        fmt::format("the length field says {} bytes, more than max_record_bytes ({})", length, rules_.max_record_bytes),
        node);
  begin_ += kHeader;
  const auto size = static_cast<std::size_t>(length);
  const auto truncated = [&](std::uint64_t present) {
    return framing_error(
        fmt::format("the file ends after {} of the record's {} bytes", kHeader + present, kHeader + length + kFooter),
        node);
  };

  if (length <= kBuffer - kBlock - kFooter) {  // small: through the buffer
    if (!ensure(size + kFooter, node)) throw truncated(end_ - begin_);
    const char* data = buffer_.data() + begin_;
    if (owned != nullptr) {
      owned->assign(data, size);
      record = *owned;
    } else {
      record = std::string_view(data, size);
    }
    begin_ += size;
  } else {  // large: read straight into its string
    std::string& target = owned != nullptr ? *owned : scratch_;
    target.resize(size);
    std::size_t have = std::min(size, end_ - begin_);
    if (have > 0) std::memcpy(target.data(), buffer_.data() + begin_, have);
    begin_ += have;
    while (have < size) {
      const std::size_t got = read_direct(target.data() + have, size - have, node);
      if (got == 0) throw truncated(have);
      have += got;
    }
    if (!ensure(kFooter, node)) throw truncated(size + (end_ - begin_));
    record = target;
  }
  const std::uint32_t stored = load32(buffer_.data() + begin_);
  begin_ += kFooter;
  if (rules_.verify_crc) {
    const std::uint32_t computed = crc32c_mask(crc32c(record.data(), record.size()));
    if (stored != computed)
      throw record_error(
          fmt::format("the data's CRC does not match (stored {:#010x}, computed {:#010x})", stored, computed), node);
  }
  return true;
}

}  // namespace dpipe::io::detail

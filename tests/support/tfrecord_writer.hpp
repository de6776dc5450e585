#pragma once
// Writes TFRecord files for the TFRecord tests and benchmark B5: the framing and the protobuf
// encoding of tf.train.Example, field by field, independently of the reader under test (the
// CRC32C is the library's, checked against the published vectors in test_tfrecord.cpp).

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "io/crc32c.hpp"

namespace dpipe::testing {

// --- an independent TFRecord writer ----------------------------------------------------------

inline std::string le_bytes(std::uint64_t value, int count) {
  std::string bytes;
  for (int i = 0; i < count; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xffU));
  return bytes;
}

inline std::uint32_t masked_crc(const std::string& bytes) {
  const std::uint32_t crc = dpipe::io::detail::crc32c(bytes.data(), bytes.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

/// One framed record: length, its masked CRC, the data, its masked CRC.
inline std::string frame(const std::string& data) {
  const std::string length = le_bytes(data.size(), 8);
  return length + le_bytes(masked_crc(length), 4) + data + le_bytes(masked_crc(data), 4);
}

inline std::string frames(const std::vector<std::string>& records) {
  std::string file;
  for (const auto& record : records) file += frame(record);
  return file;
}

// --- an independent protobuf encoder ---------------------------------------------------------

inline std::string varint(std::uint64_t value) {
  std::string bytes;
  while (value >= 0x80) {
    bytes.push_back(static_cast<char>((value & 0x7fU) | 0x80U));
    value >>= 7;
  }
  bytes.push_back(static_cast<char>(value));
  return bytes;
}

inline std::string tag(std::uint64_t field, std::uint64_t wire) { return varint((field << 3) | wire); }

inline std::string delimited(std::uint64_t field, const std::string& bytes) {
  return tag(field, 2) + varint(bytes.size()) + bytes;
}

inline std::string float_bytes(float value) {
  std::string bytes(4, '\0');
  std::memcpy(bytes.data(), &value, 4);
  return bytes;
}

inline std::string bytes_feature(const std::vector<std::string>& values) {
  std::string list;
  for (const auto& value : values) list += delimited(1, value);
  return delimited(1, list);
}

inline std::string float_feature(const std::vector<float>& values, bool packed) {
  std::string list;
  if (packed) {
    std::string payload;
    for (const float value : values) payload += float_bytes(value);
    list = delimited(1, payload);
  } else {
    for (const float value : values) list += tag(1, 5) + float_bytes(value);
  }
  return delimited(2, list);
}

inline std::string int64_feature(const std::vector<std::int64_t>& values, bool packed) {
  std::string list;
  if (packed) {
    std::string payload;
    for (const std::int64_t value : values) payload += varint(static_cast<std::uint64_t>(value));
    list = delimited(1, payload);
  } else {
    for (const std::int64_t value : values) list += tag(1, 0) + varint(static_cast<std::uint64_t>(value));
  }
  return delimited(3, list);
}

/// An Example with the (name, encoded Feature) entries in order.
inline std::string example(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string features;
  for (const auto& [name, feature] : entries) features += delimited(1, delimited(1, name) + delimited(2, feature));
  return delimited(1, features);
}

}  // namespace dpipe::testing

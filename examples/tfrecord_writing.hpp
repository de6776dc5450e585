#pragma once
// Writing TFRecord files, for the examples that make their own data: the framing TensorFlow writes
// (the length, its masked CRC32C, the data, its masked CRC32C).

#include <cstdint>
#include <string>
#include <string_view>

namespace dpipe_examples {

/// CRC32C (Castagnoli), bit by bit, and TFRecord's mask of it.
inline std::uint32_t masked_crc32c(std::string_view bytes) {
  std::uint32_t crc = 0xffffffffU;
  for (const char byte : bytes) {
    crc ^= static_cast<unsigned char>(byte);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82f63b78U & (0U - (crc & 1U)));
  }
  crc = ~crc;
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

inline std::string little_endian(std::uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xffU));
  return out;
}

/// One TFRecord: the length, its masked CRC32C, the data, its masked CRC32C.
inline std::string framed(const std::string& data) {
  const std::string length = little_endian(data.size(), 8);
  return length + little_endian(masked_crc32c(length), 4) + data + little_endian(masked_crc32c(data), 4);
}

}  // namespace dpipe_examples

#pragma once
/// \file
/// The scans that build record indexes (index_scan.cpp), and the positioned read and
/// little-endian loads they, indexed_records and the zip directory check use. Private to dpipe::io.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <dpipe/io/record_index.hpp>

namespace dpipe::io::detail {

/// TFRecord framing: the length (8 bytes) and its masked CRC (4) before the data, the data's
/// masked CRC (4) after it.
inline constexpr std::size_t kTFRecordHeader = 12;
inline constexpr std::size_t kTFRecordFooter = 4;

/// The little-endian 16-bit number at `p` (zip's byte order, and that of the machines dpipe runs
/// on).
inline std::uint16_t load16(const char* p) noexcept {
  std::uint16_t value = 0;
  std::memcpy(&value, p, sizeof value);
  return value;
}

/// The little-endian 32-bit number at `p` (TFRecord's byte order, and that of the machines dpipe
/// runs on).
inline std::uint32_t load32(const char* p) noexcept {
  std::uint32_t value = 0;
  std::memcpy(&value, p, sizeof value);
  return value;
}

/// The little-endian 64-bit number at `p`.
inline std::uint64_t load64(const char* p) noexcept {
  std::uint64_t value = 0;
  std::memcpy(&value, p, sizeof value);
  return value;
}

/// Reads up to `size` bytes at `offset` of `descriptor` into `data` with pread (never moving a
/// file offset), again after EINTR and short reads; returns how many came, fewer only at the end
/// of the file. Throws DataError naming `node`, `path` and `offset` on a read error.
std::size_t read_at(int descriptor, char* data, std::size_t size, std::uint64_t offset, std::string_view path,
                    std::string_view node);

/// Fills index.spans (and index.blank or index.names and index.name_ends) with the records of
/// the first `size` bytes of `descriptor`, as index.spec says, reading them front to back in 1 MiB
/// blocks. DataError naming `node`, index.path and the byte offset of a record that cannot be
/// indexed.
void scan_records(int descriptor, std::uint64_t size, RecordIndex& index, std::string_view node);

}  // namespace dpipe::io::detail

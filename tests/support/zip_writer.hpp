#pragma once
// stored_zip: a zip built byte by byte as Python's zipfile writes one (stored members, sizes and
// CRC32 in the local headers, the UTF-8 flag on a name that is not ASCII), so that the I/O tests
// can damage its headers at known offsets. Without Catch.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include <zlib.h>

namespace dpipe::testing {

namespace detail {

/// Appends `value` to `out` as `bytes` little-endian bytes.
inline void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int byte = 0; byte < bytes; ++byte) out.push_back(static_cast<char>((value >> (8 * byte)) & 0xffU));
}

}  // namespace detail

/// A zip of `entries` (name, bytes), each stored uncompressed: its local headers and data, its
/// central directory and the end record. Members' local headers start at the offsets the central
/// directory gives. With `zip64`, every size and offset is in a zip64 extra field (local and
/// central), and a zip64 end record and its locator come before the end record.
inline std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& entries, bool zip64 = false) {
  using detail::put_le;
  constexpr std::uint64_t kIn64 = 0xffffffff;
  std::string local;
  std::string central;
  for (const auto& [name, bytes] : entries) {
    const auto crc = ::crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size()));
    bool ascii = true;
    for (const char c : name) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    const std::uint64_t flags = ascii ? 0 : 0x800;  // bit 11: the name is UTF-8
    const auto offset = local.size();
    local += std::string("PK\3\4", 4);
    put_le(local, 20, 2);  // version needed: 2.0
    put_le(local, flags, 2);
    put_le(local, 0, 2);  // stored
    put_le(local, 0, 4);  // time and date: 1980-00-00
    put_le(local, crc, 4);
    put_le(local, zip64 ? kIn64 : bytes.size(), 4);
    put_le(local, zip64 ? kIn64 : bytes.size(), 4);
    put_le(local, name.size(), 2);
    put_le(local, zip64 ? 20 : 0, 2);  // the extra field
    local += name;
    if (zip64) {
      put_le(local, 1, 2);  // zip64: the size and the compressed size
      put_le(local, 16, 2);
      put_le(local, bytes.size(), 8);
      put_le(local, bytes.size(), 8);
    }
    local += bytes;
    central += std::string("PK\1\2", 4);
    put_le(central, 0x314, 2);  // made by Unix, version 2.0
    put_le(central, 20, 2);
    put_le(central, flags, 2);
    put_le(central, 0, 2);
    put_le(central, 0, 4);
    put_le(central, crc, 4);
    put_le(central, zip64 ? kIn64 : bytes.size(), 4);
    put_le(central, zip64 ? kIn64 : bytes.size(), 4);
    put_le(central, name.size(), 2);
    put_le(central, zip64 ? 28 : 0, 2);   // the extra field
    put_le(central, 0, 2);                // comment
    put_le(central, 0, 2);                // disk
    put_le(central, 0, 2);                // internal attributes
    put_le(central, 0100644U << 16U, 4);  // a regular file, rw-r--r--
    put_le(central, zip64 ? kIn64 : offset, 4);
    central += name;
    if (zip64) {
      put_le(central, 1, 2);  // zip64: the size, the compressed size and the local header's offset
      put_le(central, 24, 2);
      put_le(central, bytes.size(), 8);
      put_le(central, bytes.size(), 8);
      put_le(central, offset, 8);
    }
  }
  std::string zip = local + central;
  if (zip64) {
    const auto end64 = zip.size();
    zip += std::string("PK\6\6", 4);
    put_le(zip, 44, 8);  // the bytes that follow
    put_le(zip, 0x314, 2);
    put_le(zip, 45, 2);  // version needed: 4.5
    put_le(zip, 0, 4);
    put_le(zip, 0, 4);
    put_le(zip, entries.size(), 8);
    put_le(zip, entries.size(), 8);
    put_le(zip, central.size(), 8);
    put_le(zip, local.size(), 8);
    zip += std::string("PK\6\7", 4);
    put_le(zip, 0, 4);
    put_le(zip, end64, 8);
    put_le(zip, 1, 4);  // one disk
  }
  zip += std::string("PK\5\6", 4);
  put_le(zip, 0, 2);  // this disk
  put_le(zip, 0, 2);  // the central directory's disk
  put_le(zip, zip64 ? 0xffff : entries.size(), 2);
  put_le(zip, zip64 ? 0xffff : entries.size(), 2);
  put_le(zip, zip64 ? kIn64 : central.size(), 4);
  put_le(zip, zip64 ? kIn64 : local.size(), 4);
  put_le(zip, 0, 2);  // no comment
  return zip;
}

}  // namespace dpipe::testing

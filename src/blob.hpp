#pragma once
// The envelope of dpipe's checkpoint blobs: an 8-byte magic tag, a format version, the body, and an
// FNV-1a checksum of everything before it. Private to the library.

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/serialization/serializer.hpp>

#include "fnv.hpp"

namespace dpipe::detail {

using Magic = std::array<char, 8>;

/// Starts a blob: writes the magic tag and the version.
inline void begin_blob(ByteWriter& writer, const Magic& magic, std::uint32_t version) {
  writer.write_bytes(magic.data(), magic.size());
  writer.write(version);
}

/// Ends a blob: appends the checksum of everything in it.
inline void seal_blob(std::vector<std::byte>& blob) { ByteWriter(blob).write(fnv1a(blob)); }

/// Checks a blob's size, magic tag, version and checksum, and returns a reader over its body.
/// Throws StateError naming `what` ("graph checkpoint", ...) and the problem.
inline ByteReader open_blob(std::span<const std::byte> blob, const Magic& magic, std::uint32_t version,
                            const char* what) {
  constexpr std::size_t kEnvelope = sizeof(Magic) + sizeof(std::uint32_t) + sizeof(std::uint64_t);
  if (blob.size() < kEnvelope) {
    DPIPE_THROW(StateError, "the {} is truncated: {} bytes, fewer than its {}-byte envelope", what, blob.size(),
                kEnvelope);
  }
  if (std::memcmp(blob.data(), magic.data(), magic.size()) != 0) {
    DPIPE_THROW(StateError, "the bytes are not a {} (bad magic)", what);
  }
  const auto body = blob.first(blob.size() - sizeof(std::uint64_t));
  std::uint64_t stored = 0;
  std::memcpy(&stored, blob.data() + body.size(), sizeof(stored));
  ByteReader reader(body.subspan(magic.size()));
  const auto found = reader.read<std::uint32_t>();
  if (found != version) {
    DPIPE_THROW(StateError, "the {} has format version {}, this dpipe reads version {}", what, found, version);
  }
  if (fnv1a(body) != stored) {
    DPIPE_THROW(StateError, "the {} is corrupted: its checksum does not match its contents", what);
  }
  return reader;
}

}  // namespace dpipe::detail

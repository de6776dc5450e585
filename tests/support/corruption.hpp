#pragma once
// Random corruption of checkpoint blobs for the fuzz tests: edits that the checksum catches, and
// edits behind a recomputed checksum that reach the decoders of every node.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

namespace dpipe::testing {

/// The envelope of a checkpoint blob (SPEC §9): 8-byte magic, 4-byte version, body, 8-byte checksum.
inline constexpr std::size_t kBlobHead = 12;
inline constexpr std::size_t kBlobChecksum = 8;

/// 1 to 4 random edits (overwrite a byte, truncate, insert a byte) at positions in [first, size - last).
/// Returns `blob` unchanged only when every edit rewrote a byte with its own value.
inline std::vector<std::byte> corrupt(const std::vector<std::byte>& blob, std::mt19937_64& random,
                                      std::size_t first = 0, std::size_t last = 0) {
  auto bytes = blob;
  const int edits = 1 + static_cast<int>(random() % 4);
  for (int edit = 0; edit < edits && bytes.size() > first + last; ++edit) {
    const std::size_t span = bytes.size() - first - last;
    const std::size_t at = first + random() % span;
    switch (random() % 3) {
      case 0:
        bytes[at] = static_cast<std::byte>(random());
        break;
      case 1:
        bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.end() - static_cast<std::ptrdiff_t>(last));
        break;
      default:
        bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::byte>(random()));
        break;
    }
  }
  return bytes;
}

/// Recomputes a blob's trailing checksum (64-bit FNV-1a of everything before it, written here
/// from its published definition) so that the corrupted body gets past the envelope check.
inline void reseal(std::vector<std::byte>& blob) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  const std::size_t body = blob.size() - kBlobChecksum;
  for (std::size_t i = 0; i < body; ++i) {
    hash ^= static_cast<std::uint64_t>(blob[i]);
    hash *= 0x100000001b3ULL;
  }
  std::memcpy(blob.data() + body, &hash, sizeof(hash));
}

/// A body-only corruption behind a valid checksum; the envelope (magic, version) stays intact.
inline std::vector<std::byte> corrupt_resealed(const std::vector<std::byte>& blob, std::mt19937_64& random) {
  auto bytes = corrupt(blob, random, kBlobHead, kBlobChecksum);
  reseal(bytes);
  return bytes;
}

/// Overwrites 1 to 4 random body bytes of a blob whose body nests other blobs (a DataLoader2
/// checkpoint holds the graph's and the reading service's, which hold the workers'), then
/// recomputes the checksum of every nested blob, innermost first, and of the whole. The nested
/// blobs are found in `blob` by their "DPIPE" magic, each preceded by its 8-byte length.
inline std::vector<std::byte> corrupt_nested_resealed(const std::vector<std::byte>& blob, std::mt19937_64& random) {
  struct Span {
    std::size_t begin;
    std::size_t size;
  };
  std::vector<Span> nested;
  constexpr std::string_view kTag = "DPIPE";
  const auto* text = reinterpret_cast<const char*>(blob.data());
  for (std::size_t at = sizeof(std::uint64_t); at + kTag.size() <= blob.size(); ++at) {
    if (std::string_view(text + at, kTag.size()) != kTag) continue;
    std::uint64_t size = 0;
    std::memcpy(&size, blob.data() + at - sizeof(size), sizeof(size));
    if (size >= kBlobHead + kBlobChecksum && size <= blob.size() - at) nested.push_back({at, size});
  }
  auto bytes = blob;
  const int edits = 1 + static_cast<int>(random() % 4);
  for (int edit = 0; edit < edits; ++edit) {
    bytes[kBlobHead + random() % (bytes.size() - kBlobHead - kBlobChecksum)] = static_cast<std::byte>(random());
  }
  std::sort(nested.begin(), nested.end(), [](const Span& a, const Span& b) { return a.begin > b.begin; });
  for (const Span& span : nested) {
    std::vector<std::byte> inner(bytes.begin() + static_cast<std::ptrdiff_t>(span.begin),
                                 bytes.begin() + static_cast<std::ptrdiff_t>(span.begin + span.size));
    reseal(inner);
    std::copy(inner.begin(), inner.end(), bytes.begin() + static_cast<std::ptrdiff_t>(span.begin));
  }
  reseal(bytes);
  return bytes;
}

}  // namespace dpipe::testing

#pragma once
// Random corruption of checkpoint blobs for the fuzz tests: edits that the checksum catches, and
// edits behind a recomputed checksum that reach the decoders of every node.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/core/state.hpp>

namespace dpipe::testing {

/// a * factor + b, wrapping instead of overflowing: pipelines fed hostile checkpoints restore
/// arbitrary element values, and their own arithmetic must not be what UBSan reports.
inline int mix(int a, unsigned factor, int b) {
  return static_cast<int>(static_cast<unsigned>(a) * factor + static_cast<unsigned>(b));
}

/// The bytes of tests/data/<name>: checkpoints an earlier dpipe wrote.
inline std::vector<std::byte> test_data(const std::string& name) {
  std::ifstream in(std::string(DPIPE_TEST_DATA_DIR) + "/" + name, std::ios::binary);
  const std::vector<char> text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

/// What a checkpoint of format 1 (dpipe before node-path keys) is refused with.
inline constexpr const char* kFormat1Refusal =
    "the checkpoint was written by an earlier dpipe in format 1 (nested blobs); this dpipe reads format 4 only: resume "
    "the run with the dpipe that wrote it, or start from a new checkpoint";

/// The envelope of a checkpoint blob (SPEC §9): 8-byte magic, 4-byte version, 8-byte total size,
/// the fields, 8-byte checksum.
inline constexpr std::size_t kBlobHead = 20;
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

/// Overwrites 1 to 4 random bytes of the fields (the envelope stays intact, so the size matches)
/// and recomputes the checksum: every decoder behind the envelope sees hostile bytes, the
/// workers' included, since a checkpoint is one flat list of fields.
inline std::vector<std::byte> corrupt_resealed(const std::vector<std::byte>& blob, std::mt19937_64& random) {
  auto bytes = blob;
  const int edits = 1 + static_cast<int>(random() % 4);
  for (int edit = 0; edit < edits; ++edit) {
    bytes[kBlobHead + random() % (bytes.size() - kBlobHead - kBlobChecksum)] = static_cast<std::byte>(random());
  }
  reseal(bytes);
  return bytes;
}

/// The value of field `key` of checkpoint `blob`.
inline std::vector<std::byte> field_value(std::span<const std::byte> blob, std::string_view key) {
  const StateStore store = StateStore::from_blob(blob);
  const StateField* field = store.find(key);
  REQUIRE(field != nullptr);
  return field->value;
}

/// `blob` with the value of field `key` replaced by `value`: a checkpoint with valid checksums
/// whose field says something else.
inline std::vector<std::byte> with_field(std::span<const std::byte> blob, std::string_view key,
                                         std::vector<std::byte> value) {
  const StateStore saved = StateStore::from_blob(blob);
  REQUIRE(saved.find(key) != nullptr);
  StateStore edited;
  for (const auto& field : saved.fields()) {
    edited.add(field.key, field.kind).value = field.key == key ? value : field.value;
  }
  return edited.to_blob();
}

}  // namespace dpipe::testing

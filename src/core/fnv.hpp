#pragma once
// FNV-1a, 64 bits: the checksum of a checkpoint. Private to the library.

#include <cstdint>
#include <span>
#include <string_view>

namespace dpipe::detail {

class Fnv1a {
 public:
  void add(std::span<const std::byte> bytes) noexcept {
    for (const auto byte : bytes) {
      hash_ ^= static_cast<std::uint64_t>(byte);
      hash_ *= 0x100000001b3ULL;
    }
  }
  void add(std::string_view text) noexcept { add(std::as_bytes(std::span(text.data(), text.size()))); }
  void add(std::uint64_t value) noexcept { add(std::as_bytes(std::span(&value, 1))); }
  [[nodiscard]] std::uint64_t value() const noexcept { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

inline std::uint64_t fnv1a(std::span<const std::byte> bytes) {
  Fnv1a hasher;
  hasher.add(bytes);
  return hasher.value();
}

}  // namespace dpipe::detail

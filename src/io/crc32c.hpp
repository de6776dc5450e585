#pragma once
/// \file
/// CRC32C (Castagnoli, the checksum of TFRecord framing): the SSE4.2 crc32 instruction when the
/// CPU has it, chosen once at run time, and a slicing-by-8 table otherwise. Private to dpipe::io.

#include <cstddef>
#include <cstdint>

namespace dpipe::io::detail {

/// The CRC32C of `size` bytes at `data`, continuing `crc` (the CRC of the bytes before them; 0 to
/// start). Thread-safe; never allocates.
[[nodiscard]] std::uint32_t crc32c_extend(std::uint32_t crc, const char* data, std::size_t size) noexcept;

/// The CRC32C of `size` bytes at `data`.
[[nodiscard]] inline std::uint32_t crc32c(const char* data, std::size_t size) noexcept {
  return crc32c_extend(0, data, size);
}

/// crc32c_extend with the table, whatever the CPU (for tests and non-x86 machines).
[[nodiscard]] std::uint32_t crc32c_extend_portable(std::uint32_t crc, const char* data, std::size_t size) noexcept;

/// Whether crc32c_extend uses the SSE4.2 instruction on this machine.
[[nodiscard]] bool crc32c_uses_hardware() noexcept;

/// TFRecord's masked CRC: rotated right by 15 bits, plus a constant, so that the CRC of bytes
/// holding CRCs is not degenerate.
[[nodiscard]] constexpr std::uint32_t crc32c_mask(std::uint32_t crc) noexcept {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

}  // namespace dpipe::io::detail

#include "io/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define DPIPE_CRC32C_X86 1
#endif

namespace dpipe::io::detail {
namespace {

constexpr std::uint32_t kPolynomial = 0x82f63b78U;  // Castagnoli, reflected

/// kTables[k][b]: the CRC of byte b followed by k zero bytes (slicing-by-8).
constexpr auto kTables = [] {
  std::array<std::array<std::uint32_t, 256>, 8> tables{};
  for (std::uint32_t byte = 0; byte < 256; ++byte) {
    std::uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1U) != 0 ? kPolynomial : 0U);
    tables[0][byte] = crc;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t byte = 0; byte < 256; ++byte)
      tables[k][byte] = (tables[k - 1][byte] >> 8) ^ tables[0][tables[k - 1][byte] & 0xffU];
  return tables;
}();

std::uint32_t load32(const unsigned char* p) noexcept {
  std::uint32_t value = 0;
  std::memcpy(&value, p, sizeof value);
  return value;  // little-endian machines only, as TFRecord's own framing
}

#ifdef DPIPE_CRC32C_X86
__attribute__((target("sse4.2"))) std::uint32_t extend_sse42(std::uint32_t crc, const char* data,
                                                             std::size_t size) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
#if defined(__x86_64__)
  std::uint64_t wide = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, p, sizeof word);
    wide = _mm_crc32_u64(wide, word);
  }
  auto state = static_cast<std::uint32_t>(wide);
#else
  std::uint32_t state = ~crc;
#endif
  for (; size >= 4; size -= 4, p += 4) state = _mm_crc32_u32(state, load32(p));
  for (; size > 0; --size, ++p) state = _mm_crc32_u8(state, *p);
  return ~state;
}
#endif

using ExtendFn = std::uint32_t (*)(std::uint32_t, const char*, std::size_t) noexcept;

ExtendFn choose() noexcept {
#ifdef DPIPE_CRC32C_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.2")) return &extend_sse42;
#endif
  return &crc32c_extend_portable;
}

const ExtendFn kExtend = choose();

}  // namespace

std::uint32_t crc32c_extend_portable(std::uint32_t crc, const char* data, std::size_t size) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  std::uint32_t state = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    const std::uint32_t low = load32(p) ^ state;
    const std::uint32_t high = load32(p + 4);
    state = kTables[7][low & 0xffU] ^ kTables[6][(low >> 8) & 0xffU] ^ kTables[5][(low >> 16) & 0xffU] ^
            kTables[4][low >> 24] ^ kTables[3][high & 0xffU] ^ kTables[2][(high >> 8) & 0xffU] ^
            kTables[1][(high >> 16) & 0xffU] ^ kTables[0][high >> 24];
  }
  for (; size > 0; --size, ++p) state = (state >> 8) ^ kTables[0][(state ^ *p) & 0xffU];
  return ~state;
}

std::uint32_t crc32c_extend(std::uint32_t crc, const char* data, std::size_t size) noexcept {
  // kExtend is set during static initialisation; a call from another static initialiser before
  // it falls back to the table.
  const ExtendFn extend = kExtend != nullptr ? kExtend : &crc32c_extend_portable;
  return extend(crc, data, size);
}

bool crc32c_uses_hardware() noexcept { return kExtend != &crc32c_extend_portable && kExtend != nullptr; }

}  // namespace dpipe::io::detail

#pragma once
/// \file
/// The byte scan CSV parsing is built on: find the next byte of a small set (a delimiter, a quote,
/// a line end), 16 bytes at a time where SSE2 is there. Shared by the CSV cursor (csv_cursor.cpp)
/// and the CSV indexer (index_scan.cpp). Private to dpipe::io.

#include <bit>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <dpipe/io/detail/csv_cursor.hpp>

namespace dpipe::io::detail {

/// The stops `a`, `b` and `c` (a byte may be given twice).
constexpr CsvStops stops_at(char a, char b, char c) {
  CsvStops stops{{}, {a, b, c}};
  for (const char byte : stops.bytes) stops.table[static_cast<unsigned char>(byte)] = true;
  return stops;
}

/// "\n" and "\r": where a line ends.
inline constexpr CsvStops kLineEnds = stops_at('\n', '\r', '\n');

/// Whether `c` is one of `stops`.
inline bool in(const CsvStops& stops, char c) noexcept { return stops.table[static_cast<unsigned char>(c)]; }

/// The first byte of [from, to) in `stops`, or `to`: the loop that reads almost every byte, 16
/// bytes at a time where SSE2 is there.
inline const char* scan(const char* from, const char* to, const CsvStops& stops) noexcept {
#if defined(__SSE2__)
  const __m128i a = _mm_set1_epi8(stops.bytes[0]);
  const __m128i b = _mm_set1_epi8(stops.bytes[1]);
  const __m128i c = _mm_set1_epi8(stops.bytes[2]);
  while (to - from >= 16) {
    const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from));
    const __m128i hits =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(chunk, a), _mm_cmpeq_epi8(chunk, b)), _mm_cmpeq_epi8(chunk, c));
    const auto mask = static_cast<unsigned>(_mm_movemask_epi8(hits));
    if (mask != 0) return from + std::countr_zero(mask);
    from += 16;
  }
#endif
  while (from != to && !in(stops, *from)) ++from;
  return from;
}

}  // namespace dpipe::io::detail

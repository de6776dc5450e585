#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <tuple>

#include <dpipe/core/error.hpp>
#include <dpipe/io/detail/line_cursor.hpp>

namespace dpipe::io::detail {
namespace {

constexpr std::size_t kBlock = std::size_t{64} << 10;
#if defined(__SSE2__)
/// Bit i is set when data[i] is '\n', for i < 64.
std::uint64_t newline_mask(const char* data) noexcept {
  const __m128i newline = _mm_set1_epi8('\n');
  std::uint64_t mask = 0;
  for (std::size_t part = 0; part < 4; ++part) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * part));
    mask |= static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, newline))))
            << (16 * part);
  }
  return mask;
}
#endif

/// Stores the offsets of the first '\n' bytes of buffer[from, end) in `out` (up to out.size() of
/// them) and returns how many: 64 bytes at a time where the machine compares 16 at once (SSE2),
/// in one pass that does not wait on what the caller makes of each line; memchr elsewhere and for
/// the last bytes.
std::size_t find_newlines(const char* buffer, std::size_t from, std::size_t end, std::span<std::size_t> out) noexcept {
  std::size_t found = 0;
#if defined(__SSE2__)
  for (; found < out.size() && end - from >= 64; from += 64) {
    for (std::uint64_t mask = newline_mask(buffer + from); mask != 0 && found < out.size(); mask &= mask - 1)
      out[found++] = from + static_cast<std::size_t>(std::countr_zero(mask));
  }
  if (found == out.size()) return found;
#endif
  while (found < out.size() && from < end) {
    const auto* newline = static_cast<const char*>(std::memchr(buffer + from, '\n', end - from));
    if (newline == nullptr) break;
    out[found++] = static_cast<std::size_t>(newline - buffer);
    from = out[found - 1] + 1;
  }
  return found;
}

}  // namespace

std::size_t LineCursor::next_buffered(std::span<std::string_view> lines) noexcept {
  if (count_ < rules_.skip_lines || lines.empty()) return 0;
  std::array<std::size_t, 64> newlines;  // NOLINT(cppcoreguidelines-pro-type-member-init): written before read
  const char* const buffer = buffer_.data();
  const std::size_t found =
      find_newlines(buffer, begin_, end_, std::span(newlines).first(std::min(newlines.size(), lines.size())));
  const std::size_t max_length = rules_.max_line_bytes;
  const bool strip = rules_.strip_newline;
  std::size_t begin = begin_;
  std::size_t start = begin;
  std::size_t taken = 0;
  for (; taken < found; ++taken) {
    const std::size_t newline = newlines[taken];
    const std::size_t length = newline - begin;
    const bool crlf = length > 0 && buffer[newline - 1] == '\r';
    if (length > max_length || (crlf && !strip)) break;
    lines[taken] = std::string_view(buffer + begin, strip ? length - (crlf ? 1 : 0) : length + 1);
    start = begin;
    begin = newline + 1;
  }
  if (taken == 0) return 0;
  begin_ = begin;
  count_ += taken;
  line_offset_ = next_offset() - (begin - start);
  return taken;
}

bool LineCursor::fill(std::string_view node) { return read_more(node, kBlock) > 0; }

std::optional<std::pair<std::size_t, bool>> LineCursor::find_line(std::string_view node) {
  std::size_t searched = 0;  // bytes of the line known to hold no '\n'
  for (;;) {
    if (end_ - begin_ > searched) {
      const char* from = buffer_.data() + begin_ + searched;
      const auto* newline = static_cast<const char*>(std::memchr(from, '\n', end_ - begin_ - searched));
      if (newline != nullptr) return std::pair{static_cast<std::size_t>(newline - (buffer_.data() + begin_)), true};
    }
    searched = end_ - begin_;
    if (searched > rules_.max_line_bytes) reject_long_line(next_offset(), node);
    if (!fill(node)) {
      if (searched == 0) return std::nullopt;
      return std::pair{searched, false};  // the last line, without a newline
    }
  }
}

void LineCursor::reject_long_line(std::uint64_t offset, std::string_view node) {
  const std::uint64_t number = count_ + 1;
  // Moves past the line: through its '\n', or to the end of the file.
  for (;;) {
    const auto* newline =
        end_ > begin_ ? static_cast<const char*>(std::memchr(buffer_.data() + begin_, '\n', end_ - begin_)) : nullptr;
    if (newline != nullptr) {
      begin_ = static_cast<std::size_t>(newline - buffer_.data()) + 1;
      break;
    }
    begin_ = end_;
    if (!fill(node)) break;
  }
  ++count_;
  throw DataError(node, {.path = file_->path(), .line = number, .byte_offset = offset},
                  fmt::format("the line is longer than max_line_bytes ({})", rules_.max_line_bytes));
}

std::optional<std::string_view> LineCursor::next(std::string_view node) {
  for (;;) {
    // Most lines end inside the buffer: one memchr; find_line() reads more for the others.
    const auto* newline =
        end_ > begin_ ? static_cast<const char*>(std::memchr(buffer_.data() + begin_, '\n', end_ - begin_)) : nullptr;
    std::size_t length = 0;
    bool ended = true;
    if (newline != nullptr) [[likely]] {
      length = static_cast<std::size_t>(newline - (buffer_.data() + begin_));
    } else {
      const auto found = find_line(node);
      if (!found) {
        close();
        return std::nullopt;
      }
      std::tie(length, ended) = *found;
    }
    if (length > rules_.max_line_bytes) reject_long_line(next_offset(), node);
    const char* text = buffer_.data() + begin_;
    line_offset_ = next_offset();
    begin_ += length + (ended ? 1 : 0);
    if (++count_ <= rules_.skip_lines) continue;
    // Python's text mode ends a line at "\n" or "\r\n" and hands "\n" over.
    const bool crlf = ended && length > 0 && text[length - 1] == '\r';
    if (rules_.strip_newline || !ended) return std::string_view(text, length - (crlf ? 1 : 0));
    if (!crlf) return std::string_view(text, length + 1);  // with its '\n'
    rewritten_.assign(text, length - 1);
    rewritten_.push_back('\n');
    return rewritten_;
  }
}

}  // namespace dpipe::io::detail

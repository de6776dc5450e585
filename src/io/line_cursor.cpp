#include <cstring>

#include <dpipe/core/error.hpp>
#include <dpipe/io/detail/line_cursor.hpp>

namespace dpipe::io::detail {
namespace {

constexpr std::size_t kBlock = std::size_t{64} << 10;

}  // namespace

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

bool LineCursor::next(std::string& line, std::string_view node) {
  for (;;) {
    const auto found = find_line(node);
    if (!found) {
      close();
      return false;
    }
    const auto [length, ended] = *found;
    if (length > rules_.max_line_bytes) reject_long_line(next_offset(), node);
    const char* text = buffer_.data() + begin_;
    line_offset_ = next_offset();
    begin_ += length + (ended ? 1 : 0);
    if (++count_ <= rules_.skip_lines) continue;
    // Python's text mode ends a line at "\n" or "\r\n" and hands "\n" over.
    std::size_t kept = length;
    if (ended && kept > 0 && text[kept - 1] == '\r') --kept;
    line.assign(text, kept);
    if (ended && !rules_.strip_newline) line.push_back('\n');
    return true;
  }
}

}  // namespace dpipe::io::detail

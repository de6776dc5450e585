#pragma once
/// \file
/// dpipe::io::LineBlock: consecutive lines of one file in one buffer, what
/// `io::readlines(options, io::in_blocks(n))` yields. One allocation per block instead of one per
/// line, and one buffer to copy when it crosses from a worker process.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dpipe/io/detail/index_iterator.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::io {

/// Lines of one file in one buffer. Line i of a block is line first_line() + i of path(): a block
/// never spans files nor a skipped line. Thread-safety: as a standard container (const members
/// may be called concurrently).
class LineBlock {
 public:
  /// Where a line is in the block's buffer: bytes [begin, end).
  struct Span {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
  };

  /// Iterates the lines as string_views into the block (valid while the block lives unchanged).
  using const_iterator = detail::IndexIterator<LineBlock, std::string_view>;

  LineBlock() = default;
  /// An empty block of lines of `path`, whose first line will be line `first_line` (from 1).
  LineBlock(std::string path, std::uint64_t first_line) : path_(std::move(path)), first_line_(first_line) {}
  /// The block `path`, `first_line` whose lines are the `spans` of `buffer`. InvalidArgument when
  /// a span is not inside the buffer.
  LineBlock(std::string path, std::uint64_t first_line, std::string buffer, std::vector<Span> spans);

  /// The file (or URL) the lines come from.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// The number of the block's first line in its file, from 1, counting skipped header lines.
  [[nodiscard]] std::uint64_t first_line() const noexcept { return first_line_; }

  [[nodiscard]] std::size_t size() const noexcept { return spans_.size(); }
  [[nodiscard]] bool empty() const noexcept { return spans_.empty(); }
  /// Line `index` (< size()), without its newline unless the reader kept newlines.
  [[nodiscard]] std::string_view operator[](std::size_t index) const noexcept {
    const Span span = spans_[index];
    return {buffer_.data() + span.begin, static_cast<std::size_t>(span.end - span.begin)};
  }
  /// Line `index`; std::out_of_range past the end.
  [[nodiscard]] std::string_view at(std::size_t index) const;
  [[nodiscard]] const_iterator begin() const noexcept { return {this, 0}; }
  [[nodiscard]] const_iterator end() const noexcept { return {this, size()}; }
  /// The lines as strings, for code that wants to own them one by one.
  [[nodiscard]] std::vector<std::string> strings() const;

  /// The bytes the lines are in: each piece append() or append_run() added ends with a '\n'
  /// outside the lines' spans, so no two lines run together (between the lines of a run lies what
  /// lay between them, such as their newlines).
  [[nodiscard]] const std::string& buffer() const noexcept { return buffer_; }
  /// Where each line is in buffer().
  [[nodiscard]] const std::vector<Span>& spans() const noexcept { return spans_; }

  /// Appends a copy of `line`, then a '\n'.
  void append(std::string_view line) {
    const std::uint64_t begin = buffer_.size();
    buffer_.append(line);
    spans_.push_back({begin, buffer_.size()});
    buffer_.push_back('\n');
  }
  /// Appends `lines`, which lie in one buffer in order (each starts at or after the end of the one
  /// before it), with one copy of the bytes from the first line's start to the last line's end,
  /// then a '\n'.
  void append_run(std::span<const std::string_view> lines);
  /// Makes room for `lines` lines in `bytes` bytes of buffer.
  void reserve(std::size_t lines, std::size_t bytes) {
    spans_.reserve(lines);
    buffer_.reserve(bytes);
  }

  /// The same path, first line and lines (what lies between the lines does not count).
  bool operator==(const LineBlock& other) const;

 private:
  std::string path_;
  std::uint64_t first_line_ = 1;
  std::string buffer_;
  std::vector<Span> spans_;
};

}  // namespace dpipe::io

namespace dpipe {

/// A LineBlock crosses from worker processes as its path, first line, buffer and spans; a block
/// with a span outside its buffer does not decode (SerializationError).
template <>
struct Serializer<io::LineBlock> {
  static constexpr std::size_t kMinSize = 32;
  static void write(ByteWriter& writer, const io::LineBlock& block);
  static io::LineBlock read(ByteReader& reader);
};

}  // namespace dpipe

#pragma once
/// \file
/// dpipe::io::CsvBlock: consecutive rows of one CSV file in one buffer, what
/// `io::parse_csv(options, io::in_blocks(n))` yields. One allocation per block instead of one per
/// row and per long field, and one buffer to copy when it crosses from a worker process.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dpipe/io/detail/index_iterator.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::io {

namespace detail {
class CsvBlockSink;
}  // namespace detail

/// Rows of one CSV file, their fields back to back in one buffer (quotes removed, doubled quotes
/// made single). Row 0 starts on line first_line() of path(); a block never spans files nor a
/// skipped row. A blank line is a row of no fields. Thread-safety: as a standard container (const
/// members may be called concurrently).
class CsvBlock {
 public:
  /// One row of a block: its fields as string_views into the block (valid while it lives
  /// unchanged).
  class Row {
   public:
    using const_iterator = detail::IndexIterator<Row, std::string_view>;

    [[nodiscard]] std::size_t size() const noexcept { return count_; }
    [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
    /// Field `index` (< size()).
    [[nodiscard]] std::string_view operator[](std::size_t index) const noexcept {
      return block_->field(first_ + index);
    }
    /// Field `index`; std::out_of_range past the end.
    [[nodiscard]] std::string_view at(std::size_t index) const;
    [[nodiscard]] const_iterator begin() const noexcept { return {this, 0}; }
    [[nodiscard]] const_iterator end() const noexcept { return {this, count_}; }
    /// The fields as strings: the row parse_csv() would yield.
    [[nodiscard]] std::vector<std::string> strings() const { return {begin(), end()}; }

   private:
    friend class CsvBlock;
    Row(const CsvBlock* block, std::size_t first, std::size_t count) noexcept
        : block_(block), first_(first), count_(count) {}
    const CsvBlock* block_;
    std::size_t first_;
    std::size_t count_;
  };

  using const_iterator = detail::IndexIterator<CsvBlock, Row>;

  CsvBlock() = default;
  /// An empty block of rows of `path`, whose first row will start on line `first_line` (from 1).
  CsvBlock(std::string path, std::uint64_t first_line) : path_(std::move(path)), first_line_(first_line) {}
  /// The block whose field i is buffer[field_ends[i - 1], field_ends[i]) and whose row r holds the
  /// fields [row_ends[r - 1], row_ends[r]). InvalidArgument unless both rise, the fields end at
  /// the buffer's end and the rows at the last field.
  CsvBlock(std::string path, std::uint64_t first_line, std::string buffer, std::vector<std::uint64_t> field_ends,
           std::vector<std::uint64_t> row_ends);

  /// The file (or URL) the rows come from.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// The line where the block's first row starts, from 1, counting skipped lines.
  [[nodiscard]] std::uint64_t first_line() const noexcept { return first_line_; }

  /// The number of rows.
  [[nodiscard]] std::size_t size() const noexcept { return row_ends_.size(); }
  [[nodiscard]] bool empty() const noexcept { return row_ends_.empty(); }
  /// Row `index` (< size()).
  [[nodiscard]] Row operator[](std::size_t index) const noexcept {
    const std::size_t first = index == 0 ? 0 : row_ends_[index - 1];
    return {this, first, row_ends_[index] - first};
  }
  /// Row `index`; std::out_of_range past the end.
  [[nodiscard]] Row at(std::size_t index) const;
  [[nodiscard]] const_iterator begin() const noexcept { return {this, 0}; }
  [[nodiscard]] const_iterator end() const noexcept { return {this, size()}; }

  /// Appends a row of copies of `fields` (strings or string_views).
  template <class Fields = std::initializer_list<std::string_view>>
  void append(const Fields& fields) {
    for (const std::string_view field : fields) {
      buffer_.append(field);
      field_ends_.push_back(buffer_.size());
    }
    row_ends_.push_back(field_ends_.size());
  }

  /// The fields' bytes, back to back.
  [[nodiscard]] const std::string& buffer() const noexcept { return buffer_; }
  /// The end of each field in buffer().
  [[nodiscard]] const std::vector<std::uint64_t>& field_ends() const noexcept { return field_ends_; }
  /// The end of each row in field_ends().
  [[nodiscard]] const std::vector<std::uint64_t>& row_ends() const noexcept { return row_ends_; }

  /// The same path, first line and rows.
  bool operator==(const CsvBlock& other) const;

 private:
  friend class detail::CsvBlockSink;

  /// Field `index` of the block.
  [[nodiscard]] std::string_view field(std::size_t index) const noexcept {
    const std::uint64_t begin = index == 0 ? 0 : field_ends_[index - 1];
    return {buffer_.data() + begin, static_cast<std::size_t>(field_ends_[index] - begin)};
  }

  std::string path_;
  std::uint64_t first_line_ = 1;
  std::string buffer_;
  std::vector<std::uint64_t> field_ends_;
  std::vector<std::uint64_t> row_ends_;
};

}  // namespace dpipe::io

namespace dpipe {

/// A CsvBlock crosses from worker processes as its path, first line, buffer and ends; a block whose
/// ends do not cut its buffer does not decode (SerializationError).
template <>
struct Serializer<io::CsvBlock> {
  static constexpr std::size_t kMinSize = 40;
  static void write(ByteWriter& writer, const io::CsvBlock& block) {
    writer.write(block.path());
    writer.write(block.first_line());
    writer.write(block.buffer());
    writer.write(block.field_ends());
    writer.write(block.row_ends());
  }
  static io::CsvBlock read(ByteReader& reader);
};

}  // namespace dpipe

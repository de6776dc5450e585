#pragma once
/// \file
/// `io::readlines(options)` (torchdata's LineReader): the lines of each opened file, as
/// (path, line) pairs, as lines alone with `io::lines_only`, or in blocks of n lines with
/// `io::in_blocks(n)` (dpipe's fast form: one allocation per block). Checkpoint state: the file being
/// read, the byte offset of its next line and its line count; a restore reopens that one file
/// there and reads nothing before it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/detail/line_block_reading.hpp>
#include <dpipe/io/detail/line_cursor.hpp>
#include <dpipe/io/file_reader.hpp>
#include <dpipe/io/in_blocks.hpp>
#include <dpipe/io/line_block.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io {

struct ReadLinesOptions {
  /// Lines skipped at the start of each file (a header).
  std::size_t skip_lines = 0;
  /// Drop the line ending ("\n" or "\r\n"); when false a line keeps "\n" (Python's text mode).
  bool strip_newline = true;
  /// A longer line is a DataError (or skipped, with OnError::skip): a file without newlines does
  /// not fill the memory.
  std::size_t max_line_bytes = std::size_t{64} << 20;
  /// A read error skips the rest of its file; an overlong line skips that line.
  OnError on_error = {};
};

/// Tag: readlines yields the lines alone (torchdata's return_path=False).
struct LinesOnly {};
inline constexpr LinesOnly lines_only{};

/// A line and the path of its file: what readlines() yields by default (torchdata's
/// return_path=True).
using PathLine = std::pair<std::string, std::string>;

namespace detail {

/// What the line readers share: the options, their check and their settings.
template <class Out>
class LineReaderBase : public FileReader<Out, LineCursor> {
 public:
  static constexpr std::string_view kName = "readlines";

  [[nodiscard]] NodeSettings settings() const override {
    return {{"skip_lines", std::to_string(options_.skip_lines)},
            {"strip_newline", options_.strip_newline ? "true" : "false"},
            {"max_line_bytes", std::to_string(options_.max_line_bytes)}};
  }

 protected:
  LineReaderBase(const IterPipe<OpenedFile>& files, ReadLinesOptions options)
      : FileReader<Out, LineCursor>(kName, files,
                                    LineCursor({options.skip_lines, options.strip_newline, options.max_line_bytes}),
                                    options.on_error),
        options_(options) {
    if (options.max_line_bytes == 0) DPIPE_THROW(InvalidArgument, "readlines: max_line_bytes must be > 0");
  }

 private:
  ReadLinesOptions options_;
};

}  // namespace detail

/// Yields the lines of each file its source opens, file after file (Out: PathLine or
/// std::string). Lines end at "\n"; a last line without one is yielded too; a file's lines are
/// numbered from 1 in errors, skipped lines included. Thread-safety: one iterating thread.
template <class Out>
class LineReader final : public detail::LineReaderBase<Out> {
  static_assert(std::is_same_v<Out, PathLine> || std::is_same_v<Out, std::string>);

 public:
  LineReader(const IterPipe<OpenedFile>& files, ReadLinesOptions options)
      : detail::LineReaderBase<Out>(files, options) {}

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<LineReader>(*this); }

 protected:
  std::optional<Out> read_next() override {
    const auto line = this->cursor_.next(this->label());
    if (!line) return std::nullopt;
    if constexpr (std::is_same_v<Out, PathLine>) {
      return PathLine{this->cursor_.path(), std::string(*line)};
    } else {
      return std::string(*line);
    }
  }
};

/// Yields the lines of each file its source opens as LineBlocks of up to `lines_per_block` lines,
/// the lines and errors of LineReader, with one allocation per block instead of one per line. A
/// block ends early at the end of its file, and after a bad line that OnError::skip skipped, so
/// that its lines are consecutive; with the raise policy a bad line raises and the lines read into
/// its block before it are lost, as with a batch. Checkpoint state: LineReader's, taken between
/// blocks. Thread-safety: one iterating thread.
class LineBlockReader final : public detail::LineReaderBase<LineBlock> {
 public:
  LineBlockReader(const IterPipe<OpenedFile>& files, ReadLinesOptions options, std::size_t lines_per_block)
      : detail::LineReaderBase<LineBlock>(files, options), lines_per_block_(lines_per_block) {
    if (lines_per_block == 0) DPIPE_THROW(InvalidArgument, "readlines: in_blocks needs at least 1 line per block");
  }

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<LineBlockReader>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    auto settings = detail::LineReaderBase<LineBlock>::settings();
    settings.emplace_back("lines_per_block", std::to_string(lines_per_block_));
    return settings;
  }

 protected:
  std::optional<LineBlock> read_next() override {
    return detail::read_line_block(
        cursor_, label(), {.max_lines = lines_per_block_}, bytes_hint_,
        [this](const DataError& error) { skip_bad_data(error); }, [](std::size_t /*first*/, std::int64_t /*delta*/) {});
  }

 private:
  std::size_t lines_per_block_;
  std::size_t bytes_hint_ = 0;  // the last block's buffer: the next one reserves as much
};

/// `files | io::readlines(options)`: (path, line) pairs.
[[nodiscard]] inline auto readlines(ReadLinesOptions options = {}) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<LineReader<PathLine>>(files, options); }};
}

/// `files | io::readlines(options, io::in_blocks(n))`: LineBlocks of up to n lines.
[[nodiscard]] inline auto readlines(ReadLinesOptions options, InBlocks blocks) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<LineBlockReader>(files, options, blocks.units); }};
}

/// `files | io::readlines(options, io::lines_only)`: the lines alone.
[[nodiscard]] inline auto readlines(ReadLinesOptions options, LinesOnly /*tag*/) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<LineReader<std::string>>(files, options); }};
}

}  // namespace dpipe::io

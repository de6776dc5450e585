#pragma once
/// \file
/// `io::readlines(options)` (torchdata's LineReader): the lines of each opened file, as
/// (path, line) pairs, or as lines alone with `io::lines_only`. Checkpoint state: the file being
/// read, the byte offset of its next line and its line count; a restore reopens that one file
/// there and reads nothing before it.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/detail/file_reader.hpp>
#include <dpipe/io/detail/line_cursor.hpp>
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

/// Yields the lines of each file its source opens, file after file (Out: PathLine or
/// std::string). Lines end at "\n"; a last line without one is yielded too; a file's lines are
/// numbered from 1 in errors, skipped lines included. Thread-safety: one iterating thread.
template <class Out>
class LineReader final : public detail::FileReader<Out, detail::LineCursor> {
  static_assert(std::is_same_v<Out, PathLine> || std::is_same_v<Out, std::string>);
  using Base = detail::FileReader<Out, detail::LineCursor>;

 public:
  static constexpr std::string_view kName = "readlines";

  LineReader(const IterPipe<OpenedFile>& files, ReadLinesOptions options)
      : Base(kName, files, detail::LineCursor({options.skip_lines, options.strip_newline, options.max_line_bytes}),
             options.on_error),
        options_(options) {
    if (options.max_line_bytes == 0) DPIPE_THROW(InvalidArgument, "readlines: max_line_bytes must be > 0");
  }

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<LineReader>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    return {{"skip_lines", std::to_string(options_.skip_lines)},
            {"strip_newline", options_.strip_newline ? "true" : "false"},
            {"max_line_bytes", std::to_string(options_.max_line_bytes)}};
  }

 protected:
  std::optional<Out> read_next() override {
    std::string line;
    if (!this->cursor_.next(line, this->label())) return std::nullopt;
    if constexpr (std::is_same_v<Out, PathLine>) {
      return PathLine{this->cursor_.path(), std::move(line)};
    } else {
      return line;
    }
  }

 private:
  ReadLinesOptions options_;
};

/// `files | io::readlines(options)`: (path, line) pairs.
[[nodiscard]] inline auto readlines(ReadLinesOptions options = {}) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<LineReader<PathLine>>(files, options); }};
}

/// `files | io::readlines(options, io::lines_only)`: the lines alone.
[[nodiscard]] inline auto readlines(ReadLinesOptions options, LinesOnly /*tag*/) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<LineReader<std::string>>(files, options); }};
}

}  // namespace dpipe::io

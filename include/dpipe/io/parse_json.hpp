#pragma once
/// \file
/// JSON nodes, parsed with simdjson (inside dpipe::io, not in this header):
/// `io::parse_jsonl(options)` yields one io::Json per non-blank line of each opened file (JSON
/// lines), or (path, Json) pairs with `io::with_path`; `io::parse_json_files(options)` (torchdata's
/// JsonParser) parses each whole file as one document and yields (path, Json) pairs.

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
#include <dpipe/io/detail/each_input.hpp>
#include <dpipe/io/detail/line_cursor.hpp>
#include <dpipe/io/file_reader.hpp>
#include <dpipe/io/json.hpp>
#include <dpipe/io/opened_file.hpp>
#include <dpipe/io/with_path.hpp>

namespace dpipe::io {

struct ParseJsonlOptions {
  /// A longer line is a DataError (or skipped, with OnError::skip): a file without newlines does
  /// not fill the memory.
  std::size_t max_line_bytes = std::size_t{64} << 20;
  /// A line that is not JSON or too long skips that line; a read error skips the rest of its file.
  OnError on_error = {};
};

struct ParseJsonFilesOptions {
  /// A larger file is a DataError (or skipped): parsing needs about ten times its size in memory.
  std::uint64_t max_file_bytes = std::uint64_t{256} << 20;
  /// A file that is not JSON, too large or unreadable is skipped whole.
  OnError on_error = {};
};

/// A JSON value and the path of its file: what parse_json_files() and parse_jsonl(options,
/// io::with_path) yield.
using PathJson = std::pair<std::string, Json>;

namespace detail {

/// One simdjson parser, reused for every document it decodes (its buffers grow to the largest
/// document and stay, up to 16 MiB of text). Copies get a parser of their own. Thread-safety: one
/// thread.
class JsonDecoder {
 public:
  /// What decode() found.
  enum class Result : std::uint8_t { kValue, kBlank, kInvalid };

  JsonDecoder();
  JsonDecoder(const JsonDecoder& other);
  JsonDecoder& operator=(const JsonDecoder&) = delete;
  ~JsonDecoder();

  /// Bytes that must be readable after the text decode_padded() parses (simdjson's padding).
  static constexpr std::size_t kPadding = 64;

  /// Parses `text`: its value, with `result` kValue; or null, with `result` kBlank when it holds
  /// only JSON whitespace and kInvalid when it is not one JSON document (see reason()). May grow
  /// `text`'s capacity (not its contents) by kPadding.
  Json decode(std::string& text, Result& result);
  /// Like decode(), for `size` bytes at `data` followed by kPadding readable bytes.
  Json decode_padded(const char* data, std::size_t size, Result& result);
  /// Why the last decode() returned kInvalid: "not valid JSON: TAPE_ERROR: <simdjson's reason>".
  [[nodiscard]] std::string reason() const;

 private:
  struct Parser;
  std::unique_ptr<Parser> parser_;
  int error_ = 0;  // simdjson's error code of the last decode()
};

}  // namespace detail

/// Yields the JSON value on each line of each file its source opens, file after file (Out: Json,
/// or PathJson with io::with_path). Lines end at "\n" (a "\r" before it is dropped); blank lines
/// (empty or JSON whitespace only) are skipped; lines are numbered from 1 in errors, blank ones
/// included. Checkpoint state: the file being read, the byte offset of its next line and its line
/// count; a restore reopens that one file there. Thread-safety: one iterating thread.
template <class Out>
class JsonLinesParser final : public FileReader<Out, detail::LineCursor> {
  static_assert(std::is_same_v<Out, Json> || std::is_same_v<Out, PathJson>);
  using Base = FileReader<Out, detail::LineCursor>;

 public:
  static constexpr std::string_view kName = "parse_jsonl";

  JsonLinesParser(const IterPipe<OpenedFile>& files, ParseJsonlOptions options)
      : Base(kName, files,
             detail::LineCursor({.skip_lines = 0, .strip_newline = true, .max_line_bytes = options.max_line_bytes}),
             options.on_error),
        options_(options) {
    if (options.max_line_bytes == 0) DPIPE_THROW(InvalidArgument, "parse_jsonl: max_line_bytes must be > 0");
  }

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<JsonLinesParser>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    return {{"max_line_bytes", std::to_string(options_.max_line_bytes)}};
  }

 protected:
  std::optional<Out> read_next() override {
    auto& cursor = this->cursor_;
    for (;;) {
      const auto line = cursor.next(this->label());
      if (!line) return std::nullopt;
      line_.assign(*line);
      auto result = detail::JsonDecoder::Result::kValue;
      Json value = decoder_.decode(line_, result);
      switch (result) {
        case detail::JsonDecoder::Result::kBlank:
          continue;
        case detail::JsonDecoder::Result::kInvalid:
          throw DataError(this->label(),
                          {.path = cursor.path(), .line = cursor.line(), .byte_offset = cursor.line_offset()},
                          decoder_.reason());
        case detail::JsonDecoder::Result::kValue:
          break;
      }
      if constexpr (std::is_same_v<Out, PathJson>) {
        return PathJson{cursor.path(), std::move(value)};
      } else {
        return value;
      }
    }
  }

 private:
  ParseJsonlOptions options_;
  detail::JsonDecoder decoder_;
  std::string line_;  // the line being parsed, reused
};

/// Yields (path, Json) for each file its source opens, the whole file parsed as one document
/// (torchdata's JsonParser). A file is read and parsed within one step, so a checkpoint falls
/// between files: the source's state says where, this node saves only its skipped count.
/// Thread-safety: one iterating thread.
class JsonFilesParser final : public detail::EachInput<OpenedFile, PathJson> {
 public:
  static constexpr std::string_view kName = "parse_json_files";

  JsonFilesParser(const IterPipe<OpenedFile>& files, ParseJsonFilesOptions options);
  /// A copy with the same source and options, and buffers of its own.
  JsonFilesParser(const JsonFilesParser& other);
  JsonFilesParser& operator=(const JsonFilesParser&) = delete;
  ~JsonFilesParser() override;

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<JsonFilesParser>(*this); }
  [[nodiscard]] NodeSettings settings() const override;

  [[nodiscard]] bool save_state(StateWriter& writer) const override;
  void load_state(const StateReader& reader) override;

 protected:
  PathJson make(OpenedFile file) override;

 private:
  /// Reads all of `file` into text_; DataError beyond max_file_bytes.
  void read_all(OpenedFile& file);

  ParseJsonFilesOptions options_;
  detail::JsonDecoder decoder_;
  std::unique_ptr<char[]> text_;  // the file being parsed, then JsonDecoder::kPadding bytes
  std::size_t size_ = 0;          // the bytes of the file in text_
  std::size_t capacity_ = 0;      // the bytes text_ holds before its padding
};

/// `files | io::parse_jsonl(options)`: the JSON value of each non-blank line.
[[nodiscard]] inline auto parse_jsonl(ParseJsonlOptions options = {}) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<JsonLinesParser<Json>>(files, options); }};
}

/// `files | io::parse_jsonl(options, io::with_path)`: (path, Json) pairs.
[[nodiscard]] inline auto parse_jsonl(ParseJsonlOptions options, WithPath /*tag*/) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<JsonLinesParser<PathJson>>(files, options); }};
}

/// `files | io::parse_json_files(options)`: (path, Json) for each whole file.
[[nodiscard]] inline auto parse_json_files(ParseJsonFilesOptions options = {}) {
  return PipeAdaptor{[=](const IterPipe<OpenedFile>& files) { return make_iter<JsonFilesParser>(files, options); }};
}

}  // namespace dpipe::io

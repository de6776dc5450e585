#pragma once
/// \file
/// JSON nodes, parsed with simdjson (inside dpipe::io, not in this header):
/// `io::parse_jsonl(options)` yields one io::Json per non-blank line of each opened file (JSON
/// lines), or (path, Json) pairs with `io::with_path`, or io::JsonBlocks of the lines' values read
/// in place with `io::in_blocks(n)` (dpipe's fast form); `io::parse_json_files(options)`
/// (torchdata's JsonParser) parses each whole file as one document and yields (path, Json) pairs.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/detail/each_input.hpp>
#include <dpipe/io/detail/line_cursor.hpp>
#include <dpipe/io/file_reader.hpp>
#include <dpipe/io/in_blocks.hpp>
#include <dpipe/io/json.hpp>
#include <dpipe/io/json_block.hpp>
#include <dpipe/io/line_block.hpp>
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

  /// Called for a line that is not one JSON document: the lines, its index in them, and why
  /// (reason()'s text). It may throw; the block is then lost.
  using BadLine = std::function<void(const LineBlock& lines, std::size_t index, std::string reason)>;
  /// The values of the non-blank lines of `lines`, whose buffer has kPadding bytes of capacity to
  /// spare behind its end: parsed together in one pass over the buffer (simdjson's parse_many),
  /// each value checked to lie on one line of its own; when a line breaks that, each line is
  /// parsed alone, as decode() would, and `bad` hears of each line that is not JSON (it gives no
  /// record).
  JsonBlock decode_lines(LineBlock lines, const BadLine& bad);

 private:
  struct Parser;
  std::unique_ptr<Parser> parser_;
  int error_ = 0;                 // simdjson's error code of the last decode()
  std::size_t tape_hint_ = 0;     // the last block's tape words: the next one reserves as many
  std::size_t strings_hint_ = 0;  // and its string bytes
};

/// What the JSON lines readers share: the line cursor, the options, their check and settings.
template <class Out>
class JsonLinesBase : public FileReader<Out, LineCursor> {
 public:
  static constexpr std::string_view kName = "parse_jsonl";

  [[nodiscard]] NodeSettings settings() const override {
    return {{"max_line_bytes", std::to_string(options_.max_line_bytes)}};
  }

 protected:
  JsonLinesBase(const IterPipe<OpenedFile>& files, ParseJsonlOptions options)
      : FileReader<Out, LineCursor>(
            kName, files,
            LineCursor({.skip_lines = 0, .strip_newline = true, .max_line_bytes = options.max_line_bytes}),
            options.on_error),
        options_(options) {
    if (options.max_line_bytes == 0) DPIPE_THROW(InvalidArgument, "parse_jsonl: max_line_bytes must be > 0");
  }

  detail::JsonDecoder decoder_;

 private:
  ParseJsonlOptions options_;
};

}  // namespace detail

/// Yields the JSON value on each line of each file its source opens, file after file (Out: Json,
/// or PathJson with io::with_path). Lines end at "\n" (a "\r" before it is dropped); blank lines
/// (empty or JSON whitespace only) are skipped; lines are numbered from 1 in errors, blank ones
/// included. Checkpoint state: the file being read, the byte offset of its next line and its line
/// count; a restore reopens that one file there. Thread-safety: one iterating thread.
template <class Out>
class JsonLinesParser final : public detail::JsonLinesBase<Out> {
  static_assert(std::is_same_v<Out, Json> || std::is_same_v<Out, PathJson>);

 public:
  JsonLinesParser(const IterPipe<OpenedFile>& files, ParseJsonlOptions options)
      : detail::JsonLinesBase<Out>(files, options) {}

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<JsonLinesParser>(*this); }

 protected:
  std::optional<Out> read_next() override {
    auto& cursor = this->cursor_;
    for (;;) {
      const auto line = cursor.next(this->label());
      if (!line) return std::nullopt;
      line_.assign(*line);
      auto result = detail::JsonDecoder::Result::kValue;
      Json value = this->decoder_.decode(line_, result);
      switch (result) {
        case detail::JsonDecoder::Result::kBlank:
          continue;
        case detail::JsonDecoder::Result::kInvalid:
          throw DataError(this->label(),
                          {.path = cursor.path(), .line = cursor.line(), .byte_offset = cursor.line_offset()},
                          this->decoder_.reason());
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
  std::string line_;  // the line being parsed, reused
};

/// Yields the JSON lines of each file its source opens as JsonBlocks of the values of up to
/// `lines_per_block` lines, read in place: the values, blank lines and errors of JsonLinesParser,
/// with the lines of a block parsed together in one pass (simdjson's parse_many) and no owning Json
/// built. A line that is not JSON is parse_jsonl's DataError (its line and byte offset): under
/// OnError::skip it is logged, counted and left out of its block, whose other records stay; with
/// the raise policy it raises and its block is lost, as with a batch. An overlong line or a read
/// error ends the block early, as for io::LineBlock, and its error comes after those of the
/// block's lines (errors come in the file's order). A block with no record (blank or skipped lines
/// only) is not yielded. Checkpoint state: JsonLinesParser's, taken between blocks.
/// Thread-safety: one iterating thread.
class JsonBlockParser final : public detail::JsonLinesBase<JsonBlock> {
 public:
  JsonBlockParser(const IterPipe<OpenedFile>& files, ParseJsonlOptions options, std::size_t lines_per_block)
      : detail::JsonLinesBase<JsonBlock>(files, options), lines_per_block_(lines_per_block) {
    if (lines_per_block == 0) DPIPE_THROW(InvalidArgument, "parse_jsonl: in_blocks needs at least 1 line per block");
  }

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<JsonBlockParser>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    auto settings = detail::JsonLinesBase<JsonBlock>::settings();
    settings.emplace_back("lines_per_block", std::to_string(lines_per_block_));
    return settings;
  }

 protected:
  std::optional<JsonBlock> read_next() override;

 private:
  /// A piece of a block's lines copied in one go: line `first` on starts at its span + `delta`.
  struct Piece {
    std::size_t first;
    std::int64_t delta;
  };
  /// The byte offset in its file of line `index` of `lines`, the block read last.
  [[nodiscard]] std::uint64_t file_offset(const LineBlock& lines, std::size_t index) const;

  std::size_t lines_per_block_;
  std::size_t bytes_hint_ = 0;  // the last block's buffer: the next one reserves as much
  std::vector<Piece> pieces_;   // the pieces of the block read last
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

/// `files | io::parse_jsonl(options, io::in_blocks(n))`: JsonBlocks of the values of up to n lines.
[[nodiscard]] inline auto parse_jsonl(ParseJsonlOptions options, InBlocks blocks) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<JsonBlockParser>(files, options, blocks.units); }};
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

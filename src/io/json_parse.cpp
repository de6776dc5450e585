// simdjson lives here only: the public headers name none of it. The DOM parser validates the whole
// document (UTF-8 included) in one SIMD pass, then the Json value is built from its tape with
// arrays and objects reserved to their sizes, or the tape is copied into a JsonBlock whose views
// read it in place (io/json_tape.hpp reads the tape without simdjson).

#include <algorithm>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <simdjson.h>

#include <dpipe/io/detail/line_block_reading.hpp>
#include <dpipe/io/parse_json.hpp>

#include "io/json_tape.hpp"

namespace dpipe::io {
namespace {

static_assert(detail::JsonDecoder::kPadding >= simdjson::SIMDJSON_PADDING);

constexpr std::size_t kBlock = std::size_t{64} << 10;
/// A parser or a buffer grown beyond this by one document is released after it.
constexpr std::size_t kKeptCapacity = std::size_t{16} << 20;

std::string invalid_reason(simdjson::error_code error) {
  return fmt::format("not valid JSON: {}", simdjson::error_message(error));
}

/// A parsed document's string buffer.
const char* strings_of(const simdjson::dom::document& document) noexcept {
  return reinterpret_cast<const char*>(document.string_buf.get());
}

/// Parses the documents of `text` together and hands `add` the index of the line of each, in
/// order; false, with some added, when one is not valid or not alone on its line.
template <class Add>
bool parse_together(simdjson::dom::parser& parser, const std::string& text, const std::vector<LineBlock::Span>& spans,
                    const Add& add) {
  simdjson::dom::document_stream stream;
  if (parser.parse_many(text.data(), text.size(), std::max(text.size(), simdjson::dom::MINIMAL_BATCH_SIZE))
          .get(stream) != simdjson::SUCCESS)
    return false;
  // Each document must lie on a line of its own: it starts on the line after the last one's, past
  // lines with no document (JSON whitespace only, as nothing else can lie outside a document), and
  // ends on the line it starts on. A scalar cannot span lines (a string holds no raw newline); an
  // object or array ends at its last structural character.
  std::size_t line = 0;
  for (auto document = stream.begin(); document != stream.end(); ++document) {
    simdjson::dom::element root;
    if ((*document).get(root) != simdjson::SUCCESS) return false;
    const std::size_t start = document.current_index();
    while (line < spans.size() && spans[line].end <= start) ++line;
    if (line == spans.size() || start < spans[line].begin) return false;
    if ((text[start] == '{' || text[start] == '[') && start + document.source().size() > spans[line].end) return false;
    add(line++);
  }
  // Lines after the last document: blank, or the stream stopped short of them.
  for (; line < spans.size(); ++line)
    for (std::uint64_t at = spans[line].begin; at < spans[line].end; ++at)
      if (text[at] != ' ' && text[at] != '\t' && text[at] != '\r') return false;
  return true;
}

}  // namespace

namespace detail {

struct JsonDecoder::Parser {
  Parser() { parser.threaded = false; }  // parse_many reads one block in one batch, on this thread
  simdjson::dom::parser parser;
};

JsonDecoder::JsonDecoder() : parser_(std::make_unique<Parser>()) {}
JsonDecoder::JsonDecoder(const JsonDecoder& /*other*/) : parser_(std::make_unique<Parser>()) {}
JsonDecoder::~JsonDecoder() = default;

Json JsonDecoder::decode(std::string& text, Result& result) {
  if (text.capacity() - text.size() < kPadding) text.reserve(text.size() + kPadding);
  return decode_padded(text.data(), text.size(), result);
}

Json JsonDecoder::decode_padded(const char* data, std::size_t size, Result& result) {
  simdjson::dom::element root;
  const auto error = parser_->parser.parse(data, size, /*realloc_if_needed=*/false).get(root);
  if (error != simdjson::SUCCESS) {
    result = error == simdjson::EMPTY ? Result::kBlank : Result::kInvalid;
    error_ = error;
    return Json();
  }
  result = Result::kValue;
  Json value = detail::tape::TapeReader(parser_->parser.doc.tape.get(), strings_of(parser_->parser.doc)).value(1);
  if (parser_->parser.capacity() > kKeptCapacity) parser_->parser = simdjson::dom::parser();
  return value;
}

std::string JsonDecoder::reason() const { return invalid_reason(static_cast<simdjson::error_code>(error_)); }

JsonBlock JsonDecoder::decode_lines(LineBlock lines, const BadLine& bad) {
  JsonBlock block;
  block.lines_ = std::move(lines);
  block.tape_.reserve(tape_hint_);
  block.strings_.reserve(strings_hint_);
  block.records_.reserve(block.lines_.size());
  auto& parser = parser_->parser;
  const auto add = [&](std::size_t line) {  // the document parser holds is line `line`'s record
    const std::uint64_t* tape = parser.doc.tape.get();
    const char* strings = strings_of(parser.doc);
    block.records_.push_back({line, block.tape_.size(), block.strings_.size()});
    block.tape_.insert(block.tape_.end(), tape, tape + (tape[0] & detail::tape::kPayload));
    block.strings_.append(strings, detail::tape::strings_used(tape, strings));
  };
  const std::string& text = block.lines_.buffer();
  const auto& spans = block.lines_.spans();
  if (!parse_together(parser, text, spans, add)) {
    block.tape_.clear();
    block.strings_.clear();
    block.records_.clear();
    for (std::size_t line = 0; line < spans.size(); ++line) {
      const auto error =
          parser.parse(text.data() + spans[line].begin, spans[line].end - spans[line].begin, false).error();
      if (error == simdjson::SUCCESS) {
        add(line);
      } else if (error != simdjson::EMPTY) {
        bad(block.lines_, line, invalid_reason(error));
      }
    }
  }
  tape_hint_ = block.tape_.size();
  strings_hint_ = block.strings_.size();
  if (parser.capacity() > kKeptCapacity) parser = simdjson::dom::parser();
  return block;
}

}  // namespace detail

Json Json::parse(std::string_view text) {
  thread_local simdjson::dom::parser parser;
  const simdjson::padded_string padded(text);
  simdjson::dom::element root;
  const auto error = parser.parse(padded).get(root);
  if (error != simdjson::SUCCESS) throw JsonError(invalid_reason(error));
  Json value = detail::tape::TapeReader(parser.doc.tape.get(), strings_of(parser.doc)).value(1);
  if (parser.capacity() > kKeptCapacity) parser = simdjson::dom::parser();
  return value;
}

JsonFilesParser::JsonFilesParser(const IterPipe<OpenedFile>& files, ParseJsonFilesOptions options)
    : EachInput(kName, files, options.on_error), options_(options) {
  if (options.max_file_bytes == 0) DPIPE_THROW(InvalidArgument, "parse_json_files: max_file_bytes must be > 0");
}

JsonFilesParser::JsonFilesParser(const JsonFilesParser& other)
    : EachInput(other), options_(other.options_), decoder_(other.decoder_) {}

JsonFilesParser::~JsonFilesParser() = default;

NodeSettings JsonFilesParser::settings() const { return {{"max_file_bytes", std::to_string(options_.max_file_bytes)}}; }

bool JsonFilesParser::save_state(StateWriter& writer) const {
  skipper_.save_state(writer);
  return true;
}

void JsonFilesParser::load_state(const StateReader& reader) { skipper_.load_state(reader); }

void JsonFilesParser::read_all(OpenedFile& file) {
  size_ = 0;
  for (;;) {
    if (capacity_ - size_ < kBlock) {
      const std::size_t capacity = std::max(capacity_ * 2, size_ + kBlock);
      auto grown = std::make_unique_for_overwrite<char[]>(capacity + detail::JsonDecoder::kPadding);
      std::copy_n(text_.get(), size_, grown.get());
      text_ = std::move(grown);
      capacity_ = capacity;
    }
    const std::size_t got = file.read(text_.get() + size_, capacity_ - size_, label());
    if (got == 0) return;
    size_ += got;
    if (size_ > options_.max_file_bytes)
      throw DataError(label(), {.path = file.path()},
                      fmt::format("the file is larger than max_file_bytes ({})", options_.max_file_bytes));
  }
}

PathJson JsonFilesParser::make(OpenedFile file) {
  read_all(file);
  auto result = detail::JsonDecoder::Result::kValue;
  Json value = decoder_.decode_padded(text_.get(), size_, result);
  if (capacity_ > kKeptCapacity) {  // a large file: its buffer does not stay
    text_.reset();
    capacity_ = size_ = 0;
  }
  if (result != detail::JsonDecoder::Result::kValue) {
    throw DataError(
        label(), {.path = file.path()},
        result == detail::JsonDecoder::Result::kBlank ? invalid_reason(simdjson::EMPTY) : decoder_.reason());
  }
  return PathJson{file.path(), std::move(value)};
}

std::optional<JsonBlock> JsonBlockParser::read_next() {
  for (;;) {
    pieces_.clear();
    // A line that ended the block (overlong, a read error) comes after the block's lines: its
    // DataError waits for theirs, so that errors come in the order of the file.
    std::exception_ptr ended_by;
    auto lines = detail::read_line_block(
        cursor_, label(), {.max_lines = lines_per_block_, .padding = detail::JsonDecoder::kPadding}, bytes_hint_,
        [&ended_by](const DataError& /*error*/) { ended_by = std::current_exception(); },
        [this](std::size_t first, std::int64_t delta) {
          pieces_.push_back({first, delta});
        });
    if (!lines) return std::nullopt;
    JsonBlock block = decoder_.decode_lines(std::move(*lines), [this](const LineBlock& read, std::size_t index,
                                                                      std::string reason) {
      try {
        throw DataError(
            label(), {.path = read.path(), .line = read.first_line() + index, .byte_offset = file_offset(read, index)},
            std::move(reason));
      } catch (const DataError& error) {
        skip_bad_data(error);
      }
    });
    if (ended_by) {
      try {
        std::rethrow_exception(ended_by);
      } catch (const DataError& error) {
        skip_bad_data(error);
      }
    }
    if (!block.empty()) return block;
    if (!cursor_.reading()) return std::nullopt;
  }
}

std::uint64_t JsonBlockParser::file_offset(const LineBlock& lines, std::size_t index) const {
  const auto piece = std::prev(std::upper_bound(pieces_.begin(), pieces_.end(), index,
                                                [](std::size_t line, const Piece& each) { return line < each.first; }));
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(lines.spans()[index].begin) + piece->delta);
}

}  // namespace dpipe::io

// simdjson lives here only: the public headers name none of it. The DOM parser validates the whole
// document (UTF-8 included) in one SIMD pass, then the Json value is built from its tape with
// arrays and objects reserved to their sizes.

#include <algorithm>
#include <cstring>
#include <memory>
#include <simdjson.h>

#include <dpipe/io/parse_json.hpp>

namespace dpipe::io {
namespace {

static_assert(detail::JsonDecoder::kPadding >= simdjson::SIMDJSON_PADDING);

constexpr std::size_t kBlock = std::size_t{64} << 10;
/// A parser or a buffer grown beyond this by one document is released after it.
constexpr std::size_t kKeptCapacity = std::size_t{16} << 20;

std::string invalid_reason(simdjson::error_code error) {
  return fmt::format("not valid JSON: {}", simdjson::error_message(error));
}

/// Builds Json values from a parsed document's tape (simdjson's documented DOM layout: one 64-bit
/// word per value, its type in the top byte; numbers in the next word; strings as a 32-bit length
/// and the bytes in the string buffer; '{' and '[' hold the index after their closing word and their
/// element count, saturated at 0xFFFFFF). Every value is constructed in place in its parent.
class TapeReader {
 public:
  explicit TapeReader(const simdjson::dom::document& document) noexcept
      : tape_(document.tape.get()), strings_(document.string_buf.get()) {}

  /// The document's root value.
  Json root() {
    std::size_t index = 1;  // tape_[0] is the root word
    const std::uint64_t word = tape_[index];
    switch (static_cast<char>(word >> 56)) {
      case '{':
        return Json(read_object(index));
      case '[':
        return Json(read_array(index));
      default: {
        Json value;
        read(index, [&](auto&&... args) { value = Json(std::forward<decltype(args)>(args)...); });
        return value;
      }
    }
  }

 private:
  static constexpr std::uint64_t kPayload = (std::uint64_t{1} << 56) - 1;
  static constexpr std::size_t kCountSaturated = 0xFFFFFF;

  [[nodiscard]] std::string_view string_at(std::uint64_t word) const noexcept {
    const auto* at = strings_ + (word & kPayload);
    std::uint32_t length = 0;
    std::memcpy(&length, at, sizeof(length));
    return {reinterpret_cast<const char*>(at + sizeof(length)), length};
  }

  template <class T>
  [[nodiscard]] T number_at(std::size_t index) const noexcept {
    T value;
    std::memcpy(&value, &tape_[index], sizeof(value));
    return value;
  }

  /// Reads the object that starts at `index` and moves past it.
  Json::Object read_object(std::size_t& index) {
    const std::uint64_t word = tape_[index];
    const auto end = static_cast<std::uint32_t>(word);
    Json::Object object;
    object.reserve(std::min<std::size_t>((word >> 32) & kCountSaturated, end - index));
    for (++index; index + 1 < end;) {
      const auto key = string_at(tape_[index++]);
      read(index, [&](auto&&... args) {
        object.emplace_back(std::piecewise_construct, std::forward_as_tuple(key),
                            std::forward_as_tuple(std::forward<decltype(args)>(args)...));
      });
    }
    index = end;
    return object;
  }

  /// Reads the array that starts at `index` and moves past it.
  Json::Array read_array(std::size_t& index) {
    const std::uint64_t word = tape_[index];
    const auto end = static_cast<std::uint32_t>(word);
    Json::Array array;
    array.reserve(std::min<std::size_t>((word >> 32) & kCountSaturated, end - index));
    for (++index; index + 1 < end;)
      read(index, [&](auto&&... args) { array.emplace_back(std::forward<decltype(args)>(args)...); });
    index = end;
    return array;
  }

  /// Reads the value at `index` (and moves past it), handing Json's constructor arguments to `make`.
  template <class Make>
  void read(std::size_t& index, Make&& make) {
    const std::uint64_t word = tape_[index];
    switch (static_cast<char>(word >> 56)) {
      case '{':
        make(read_object(index));
        return;
      case '[':
        make(read_array(index));
        return;
      case '"':
        ++index;
        make(string_at(word));
        return;
      case 'l':
        make(number_at<std::int64_t>(index + 1));
        index += 2;
        return;
      case 'u':
        make(number_at<std::uint64_t>(index + 1));
        index += 2;
        return;
      case 'd':
        make(number_at<double>(index + 1));
        index += 2;
        return;
      case 't':
        ++index;
        make(true);
        return;
      case 'f':
        ++index;
        make(false);
        return;
      default:  // 'n'
        ++index;
        make(nullptr);
        return;
    }
  }

  const std::uint64_t* tape_;
  const std::uint8_t* strings_;
};

}  // namespace

namespace detail {

struct JsonDecoder::Parser {
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
  Json value = TapeReader(parser_->parser.doc).root();
  if (parser_->parser.capacity() > kKeptCapacity) parser_->parser = simdjson::dom::parser();
  return value;
}

std::string JsonDecoder::reason() const { return invalid_reason(static_cast<simdjson::error_code>(error_)); }

}  // namespace detail

Json Json::parse(std::string_view text) {
  thread_local simdjson::dom::parser parser;
  const simdjson::padded_string padded(text);
  simdjson::dom::element root;
  const auto error = parser.parse(padded).get(root);
  if (error != simdjson::SUCCESS) throw JsonError(invalid_reason(error));
  Json value = TapeReader(parser.doc).root();
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

}  // namespace dpipe::io

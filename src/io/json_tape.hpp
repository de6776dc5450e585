#pragma once
// The parsed form of a JSON document as simdjson's DOM parser lays it out (its documented tape
// format), read here without simdjson: one 64-bit word per value, its type in the top byte;
// numbers in the next word; strings as an offset into the string buffer, which holds a 32-bit
// length and the bytes; '{' and '[' hold the index after their closing word and their element
// count (saturated at 0xFFFFFF), '}' and ']' the index of their opening word; the document is
// framed by 'r' words, the first holding the index after the last. Json::parse, parse_jsonl and
// JsonBlock's views share it.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <utility>

#include <dpipe/io/json.hpp>

namespace dpipe::io::detail::tape {

constexpr std::uint64_t kPayload = (std::uint64_t{1} << 56) - 1;
constexpr std::size_t kCountSaturated = 0xFFFFFF;

[[nodiscard]] inline char type(std::uint64_t word) noexcept { return static_cast<char>(word >> 56); }

/// The string a '"' word names in `strings`.
[[nodiscard]] inline std::string_view string_at(const char* strings, std::uint64_t word) noexcept {
  const char* at = strings + (word & kPayload);
  std::uint32_t length = 0;
  std::memcpy(&length, at, sizeof(length));
  return {at + sizeof(length), length};
}

template <class T>
[[nodiscard]] T number_at(const std::uint64_t* tape, std::size_t index) noexcept {
  T value;
  std::memcpy(&value, &tape[index], sizeof(value));
  return value;
}

/// The index after the value at `index`.
[[nodiscard]] inline std::size_t after(const std::uint64_t* tape, std::size_t index) noexcept {
  const std::uint64_t word = tape[index];
  switch (type(word)) {
    case '{':
    case '[':
      return static_cast<std::uint32_t>(word);
    case 'l':
    case 'u':
    case 'd':
      return index + 2;
    default:
      return index + 1;
  }
}

/// The bytes of `strings` the document of `tape` uses (its strings are in tape order).
[[nodiscard]] std::size_t strings_used(const std::uint64_t* tape, const char* strings) noexcept;

/// Whether `tape` is one whole document (framed, its containers nested and counted, object keys
/// strings) nested at most `max_depth` levels, whose strings lie inside `strings`.
[[nodiscard]] bool valid(std::span<const std::uint64_t> tape, std::span<const char> strings, int max_depth);

/// Builds owning Json values from a tape; every value is constructed in place in its parent.
class TapeReader {
 public:
  TapeReader(const std::uint64_t* tape, const char* strings) noexcept : tape_(tape), strings_(strings) {}

  /// The value at `index` (1: the document's root).
  [[nodiscard]] Json value(std::size_t index) const {
    switch (type(tape_[index])) {
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
  /// Reads the object that starts at `index` and moves past it.
  Json::Object read_object(std::size_t& index) const;
  /// Reads the array that starts at `index` and moves past it.
  Json::Array read_array(std::size_t& index) const;

  /// Reads the value at `index` (and moves past it), handing Json's constructor arguments to `make`.
  template <class Make>
  void read(std::size_t& index, Make&& make) const {
    const std::uint64_t word = tape_[index];
    switch (type(word)) {
      case '{':
        make(read_object(index));
        return;
      case '[':
        make(read_array(index));
        return;
      case '"':
        ++index;
        make(string_at(strings_, word));
        return;
      case 'l':
        make(number_at<std::int64_t>(tape_, index + 1));
        index += 2;
        return;
      case 'u':
        make(number_at<std::uint64_t>(tape_, index + 1));
        index += 2;
        return;
      case 'd':
        make(number_at<double>(tape_, index + 1));
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
  const char* strings_;
};

}  // namespace dpipe::io::detail::tape

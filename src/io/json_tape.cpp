#include "io/json_tape.hpp"

#include <algorithm>
#include <optional>
#include <tuple>

namespace dpipe::io::detail::tape {
namespace {

/// Checks a tape word by word: value() returns the index after a well-formed value at `index`
/// that ends by `end`, or std::nullopt.
class Checker {
 public:
  Checker(std::span<const std::uint64_t> tape, std::span<const char> strings, int max_depth) noexcept
      : tape_(tape), strings_(strings), max_depth_(max_depth) {}

  std::optional<std::size_t> value(std::size_t index, std::size_t end, int depth) const {
    if (index >= end) return std::nullopt;
    const std::uint64_t word = tape_[index];
    switch (type(word)) {
      case '{':
      case '[':
        return container(index, end, depth);
      case '"':
        return string_ok(word) ? std::optional(index + 1) : std::nullopt;
      case 'l':
      case 'u':
      case 'd':
        return index + 2 <= end ? std::optional(index + 2) : std::nullopt;
      case 't':
      case 'f':
      case 'n':
        return index + 1;
      default:
        return std::nullopt;
    }
  }

 private:
  [[nodiscard]] bool string_ok(std::uint64_t word) const noexcept {
    const std::uint64_t at = word & kPayload;
    if (at > strings_.size() || strings_.size() - at < sizeof(std::uint32_t)) return false;
    std::uint32_t length = 0;
    std::memcpy(&length, strings_.data() + at, sizeof(length));
    return length <= strings_.size() - at - sizeof(std::uint32_t);
  }

  std::optional<std::size_t> container(std::size_t index, std::size_t end, int depth) const {
    const std::uint64_t word = tape_[index];
    const bool object = type(word) == '{';
    const std::size_t after = static_cast<std::uint32_t>(word);
    if (depth >= max_depth_ || after <= index + 1 || after > end) return std::nullopt;
    const std::uint64_t close = tape_[after - 1];
    if (type(close) != (object ? '}' : ']') || (close & kPayload) != index) return std::nullopt;
    std::size_t count = 0;
    for (std::size_t child = index + 1; child < after - 1; ++count) {
      if (object && (type(tape_[child]) != '"' || !string_ok(tape_[child++]))) return std::nullopt;
      const auto next = value(child, after - 1, depth + 1);
      if (!next) return std::nullopt;
      child = *next;
    }
    if (std::min(count, kCountSaturated) != ((word >> 32) & kCountSaturated)) return std::nullopt;
    return after;
  }

  std::span<const std::uint64_t> tape_;
  std::span<const char> strings_;
  int max_depth_;
};

}  // namespace

std::size_t strings_used(const std::uint64_t* tape, const char* strings) noexcept {
  const std::size_t last = (tape[0] & kPayload) - 1;  // the closing 'r' word
  std::size_t used = 0;
  for (std::size_t index = 1; index < last;) {
    const std::uint64_t word = tape[index];
    switch (type(word)) {
      case '"':
        used = (word & kPayload) + sizeof(std::uint32_t) + string_at(strings, word).size() + 1;  // and its NUL
        ++index;
        break;
      case 'l':
      case 'u':
      case 'd':
        index += 2;
        break;
      default:
        ++index;
    }
  }
  return used;
}

bool valid(std::span<const std::uint64_t> tape, std::span<const char> strings, int max_depth) {
  if (tape.size() < 3 || type(tape[0]) != 'r' || (tape[0] & kPayload) != tape.size() || type(tape.back()) != 'r')
    return false;
  const auto end = Checker(tape, strings, max_depth).value(1, tape.size() - 1, 0);
  return end == tape.size() - 1;
}

Json::Object TapeReader::read_object(std::size_t& index) const {
  const std::uint64_t word = tape_[index];
  const auto end = static_cast<std::uint32_t>(word);
  Json::Object object;
  object.reserve(std::min<std::size_t>((word >> 32) & kCountSaturated, end - index));
  for (++index; index + 1 < end;) {
    const auto key = string_at(strings_, tape_[index++]);
    read(index, [&](auto&&... args) {
      object.emplace_back(std::piecewise_construct, std::forward_as_tuple(key),
                          std::forward_as_tuple(std::forward<decltype(args)>(args)...));
    });
  }
  index = end;
  return object;
}

Json::Array TapeReader::read_array(std::size_t& index) const {
  const std::uint64_t word = tape_[index];
  const auto end = static_cast<std::uint32_t>(word);
  Json::Array array;
  array.reserve(std::min<std::size_t>((word >> 32) & kCountSaturated, end - index));
  for (++index; index + 1 < end;)
    read(index, [&](auto&&... args) { array.emplace_back(std::forward<decltype(args)>(args)...); });
  index = end;
  return array;
}

}  // namespace dpipe::io::detail::tape

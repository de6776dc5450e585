#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/io/json_block.hpp>

#include "io/json_tape.hpp"

namespace dpipe::io {
namespace {

/// How deep a decoded block's values may nest (simdjson's own default limit).
constexpr int kMaxDepth = 1024;

}  // namespace

Json::Kind JsonView::kind() const noexcept {
  switch (detail::tape::type(tape_[index_])) {
    case '{':
      return Json::Kind::kObject;
    case '[':
      return Json::Kind::kArray;
    case '"':
      return Json::Kind::kString;
    case 'l':
      return Json::Kind::kInt;
    case 'u':
      return Json::Kind::kUint;
    case 'd':
      return Json::Kind::kDouble;
    case 't':
    case 'f':
      return Json::Kind::kBool;
    default:  // 'n'
      return Json::Kind::kNull;
  }
}

bool JsonView::is_number() const noexcept {
  const Json::Kind kind = this->kind();
  return kind == Json::Kind::kInt || kind == Json::Kind::kUint || kind == Json::Kind::kDouble;
}

void JsonView::wrong_kind(std::string_view expected) const {
  DPIPE_THROW(JsonError, "expected {}, got {}", expected, kind_name());
}

bool JsonView::as_bool() const {
  if (!is_bool()) wrong_kind("a bool");
  return detail::tape::type(tape_[index_]) == 't';
}

std::int64_t JsonView::as_int() const {
  if (kind() == Json::Kind::kUint)
    DPIPE_THROW(JsonError, "expected an integer that fits int64, got {}",
                detail::tape::number_at<std::uint64_t>(tape_, index_ + 1));
  if (kind() != Json::Kind::kInt) wrong_kind("an integer");
  return detail::tape::number_at<std::int64_t>(tape_, index_ + 1);
}

std::uint64_t JsonView::as_uint() const {
  if (kind() == Json::Kind::kUint) return detail::tape::number_at<std::uint64_t>(tape_, index_ + 1);
  const std::int64_t value = as_int();
  if (value < 0) DPIPE_THROW(JsonError, "expected a non-negative integer, got {}", value);
  return static_cast<std::uint64_t>(value);
}

double JsonView::as_double() const {
  switch (kind()) {
    case Json::Kind::kDouble:
      return detail::tape::number_at<double>(tape_, index_ + 1);
    case Json::Kind::kInt:
      return static_cast<double>(detail::tape::number_at<std::int64_t>(tape_, index_ + 1));
    case Json::Kind::kUint:
      return static_cast<double>(detail::tape::number_at<std::uint64_t>(tape_, index_ + 1));
    default:
      wrong_kind("a number");
  }
}

std::string_view JsonView::as_string() const {
  if (!is_string()) wrong_kind("a string");
  return detail::tape::string_at(strings_, tape_[index_]);
}

std::size_t JsonView::first_child(bool object) const {
  if (object ? !is_object() : !is_array()) wrong_kind(object ? "an object" : "an array");
  return index_ + 1;
}

std::size_t JsonView::after(std::size_t index) const noexcept { return detail::tape::after(tape_, index); }

JsonViewRange<JsonView> JsonView::elements() const { return {{*this, first_child(false)}, {*this, after(index_) - 1}}; }

JsonViewRange<JsonMemberView> JsonView::members() const {
  return {{*this, first_child(true)}, {*this, after(index_) - 1}};
}

std::string_view JsonView::key_at(std::size_t index) const noexcept {
  return detail::tape::string_at(strings_, tape_[index]);
}

std::optional<JsonView> JsonView::find(std::string_view key) const {
  std::optional<JsonView> found;
  for (const auto [name, value] : members())
    if (name == key) found = value;  // the last one wins
  return found;
}

JsonView JsonView::operator[](std::string_view key) const {
  const auto member = find(key);
  if (!member) DPIPE_THROW(JsonError, "no key '{}'", key);
  return *member;
}

JsonView JsonView::operator[](std::size_t index) const {
  std::size_t seen = 0;
  for (const JsonView element : elements())
    if (seen++ == index) return element;
  DPIPE_THROW(JsonError, "index {} out of range: the array has {} elements", index, seen);
}

std::size_t JsonView::size() const {
  if (!is_array() && !is_object()) wrong_kind("an array or an object");
  const auto count = static_cast<std::size_t>((tape_[index_] >> 32) & detail::tape::kCountSaturated);
  if (count < detail::tape::kCountSaturated) return count;
  std::size_t counted = 0;
  for (std::size_t child = index_ + 1, end = after(index_) - 1; child < end; ++counted)
    child = after(child + (is_object() ? 1 : 0));
  return counted;
}

Json JsonView::to_json() const { return detail::tape::TapeReader(tape_, strings_).value(index_); }

JsonView JsonBlock::at(std::size_t index) const {
  if (index >= size()) throw std::out_of_range(fmt::format("JsonBlock::at: record {} of a block of {}", index, size()));
  return (*this)[index];
}

bool JsonBlock::operator==(const JsonBlock& other) const {
  if (path() != other.path() || size() != other.size()) return false;
  for (std::size_t index = 0; index < size(); ++index)
    if (line(index) != other.line(index) || text(index) != other.text(index)) return false;
  return true;
}

}  // namespace dpipe::io

namespace dpipe {

void Serializer<io::JsonBlock>::write(ByteWriter& writer, const io::JsonBlock& block) {
  writer.write(block.lines_);
  writer.write(block.tape_);
  writer.write(block.strings_);
  writer.write_size(block.records_.size());
  writer.write_bytes(block.records_.data(), block.records_.size() * sizeof(io::JsonBlock::Record));
}

io::JsonBlock Serializer<io::JsonBlock>::read(ByteReader& reader) {
  io::JsonBlock block;
  block.lines_ = reader.read<io::LineBlock>();
  block.tape_ = reader.read<std::vector<std::uint64_t>>();
  block.strings_ = reader.read<std::string>();
  block.records_.resize(reader.read_count(sizeof(io::JsonBlock::Record)));
  reader.read_bytes(block.records_.data(), block.records_.size() * sizeof(io::JsonBlock::Record));
  const auto& records = block.records_;
  for (std::size_t index = 0; index < records.size(); ++index) {
    const bool last = index + 1 == records.size();
    const std::uint64_t tape_end = last ? block.tape_.size() : records[index + 1].tape;
    const std::uint64_t strings_end = last ? block.strings_.size() : records[index + 1].strings;
    const bool placed = records[index].line < block.lines_.size() &&
                        (index == 0 ? records[index].tape == 0 && records[index].strings == 0
                                    : records[index].line > records[index - 1].line) &&
                        records[index].tape <= tape_end && tape_end <= block.tape_.size() &&
                        records[index].strings <= strings_end && strings_end <= block.strings_.size();
    if (!placed ||
        !io::detail::tape::valid(
            std::span(block.tape_).subspan(records[index].tape, tape_end - records[index].tape),
            std::span<const char>(block.strings_).subspan(records[index].strings, strings_end - records[index].strings),
            io::kMaxDepth))
      DPIPE_THROW(SerializationError, "corrupt input: a JsonBlock whose record {} does not check out", index);
  }
  return block;
}

}  // namespace dpipe

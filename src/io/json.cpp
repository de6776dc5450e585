#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include <dpipe/io/json.hpp>

namespace dpipe::io {
namespace {

constexpr int kMaxDecodeDepth = 1024;

void dump_string(std::string_view text, std::string& out) {
  out.push_back('"');
  std::size_t run = 0;  // the start of the bytes not yet copied
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
    }
  }
  out.append(text.data() + run, text.size() - run);
  out.push_back('"');
}

void dump_double(double value, std::string& out) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value < 0 ? "-Infinity" : "Infinity";
    return;
  }
  const std::size_t start = out.size();
  fmt::format_to(std::back_inserter(out), "{}", value);
  if (out.find_first_of(".e", start) == std::string::npos) out += ".0";  // stays a double when read back
}

Json read_json(ByteReader& reader, int depth) {
  if (depth > kMaxDecodeDepth)
    DPIPE_THROW(SerializationError, "corrupt input: a Json value nested deeper than {} levels", kMaxDecodeDepth);
  const auto kind = reader.read<std::uint8_t>();
  switch (static_cast<Json::Kind>(kind)) {
    case Json::Kind::kNull:
      return Json();
    case Json::Kind::kBool:
      return Json(reader.read<bool>());
    case Json::Kind::kInt:
      return Json(reader.read<std::int64_t>());
    case Json::Kind::kUint:
      return Json(reader.read<std::uint64_t>());
    case Json::Kind::kDouble:
      return Json(reader.read<double>());
    case Json::Kind::kString:
      return Json(reader.read<std::string>());
    case Json::Kind::kArray: {
      const auto size = reader.read_count(1);
      Json::Array array;
      array.reserve(size);
      for (std::size_t i = 0; i < size; ++i) array.push_back(read_json(reader, depth + 1));
      return Json(std::move(array));
    }
    case Json::Kind::kObject: {
      const auto size = reader.read_count(Serializer<std::string>::kMinSize + 1);
      Json::Object object;
      object.reserve(size);
      for (std::size_t i = 0; i < size; ++i) {
        auto key = reader.read<std::string>();
        object.emplace_back(std::move(key), read_json(reader, depth + 1));
      }
      return Json(std::move(object));
    }
  }
  DPIPE_THROW(SerializationError, "corrupt input: {} is not a Json kind", kind);
}

}  // namespace

std::string_view Json::kind_name(Kind kind) noexcept {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "a bool";
    case Kind::kInt:
    case Kind::kUint:
      return "an integer";
    case Kind::kDouble:
      return "a double";
    case Kind::kString:
      return "a string";
    case Kind::kArray:
      return "an array";
    case Kind::kObject:
      return "an object";
  }
  return "?";
}

void Json::wrong_kind(std::string_view expected) const {
  DPIPE_THROW(JsonError, "expected {}, got {}", expected, kind_name());
}

bool Json::as_bool() const {
  if (!is_bool()) wrong_kind("a bool");
  return std::get<bool>(value_);
}

std::int64_t Json::as_int() const {
  if (kind() == Kind::kUint)
    DPIPE_THROW(JsonError, "expected an integer that fits int64, got {}", std::get<std::uint64_t>(value_));
  if (!is_int()) wrong_kind("an integer");
  return std::get<std::int64_t>(value_);
}

std::uint64_t Json::as_uint() const {
  if (kind() == Kind::kUint) return std::get<std::uint64_t>(value_);
  if (!is_int()) wrong_kind("an integer");
  const auto value = std::get<std::int64_t>(value_);
  if (value < 0) DPIPE_THROW(JsonError, "expected a non-negative integer, got {}", value);
  return static_cast<std::uint64_t>(value);
}

double Json::as_double() const {
  switch (kind()) {
    case Kind::kDouble:
      return std::get<double>(value_);
    case Kind::kInt:
      return static_cast<double>(std::get<std::int64_t>(value_));
    case Kind::kUint:
      return static_cast<double>(std::get<std::uint64_t>(value_));
    default:
      wrong_kind("a number");
  }
}

const std::string& Json::as_string() const {
  if (!is_string()) wrong_kind("a string");
  return std::get<std::string>(value_);
}

std::string& Json::as_string() {
  if (!is_string()) wrong_kind("a string");
  return std::get<std::string>(value_);
}

const Json::Array& Json::as_array() const {
  if (!is_array()) wrong_kind("an array");
  return std::get<Array>(value_);
}

Json::Array& Json::as_array() {
  if (!is_array()) wrong_kind("an array");
  return std::get<Array>(value_);
}

const Json::Object& Json::as_object() const {
  if (!is_object()) wrong_kind("an object");
  return std::get<Object>(value_);
}

Json::Object& Json::as_object() {
  if (!is_object()) wrong_kind("an object");
  return std::get<Object>(value_);
}

const Json* Json::find(std::string_view key) const {
  const auto& members = as_object();
  for (auto member = members.rbegin(); member != members.rend(); ++member)  // the last one wins
    if (member->first == key) return &member->second;
  return nullptr;
}

Json* Json::find(std::string_view key) { return const_cast<Json*>(std::as_const(*this).find(key)); }

const Json& Json::operator[](std::string_view key) const {
  const Json* member = find(key);
  if (member == nullptr) DPIPE_THROW(JsonError, "no key '{}'", key);
  return *member;
}

Json& Json::operator[](std::string_view key) { return const_cast<Json&>(std::as_const(*this)[key]); }

const Json& Json::operator[](std::size_t index) const {
  const auto& elements = as_array();
  if (index >= elements.size())
    DPIPE_THROW(JsonError, "index {} out of range: the array has {} elements", index, elements.size());
  return elements[index];
}

Json& Json::operator[](std::size_t index) { return const_cast<Json&>(std::as_const(*this)[index]); }

std::size_t Json::size() const {
  if (is_array()) return std::get<Array>(value_).size();
  if (is_object()) return std::get<Object>(value_).size();
  wrong_kind("an array or an object");
}

std::string Json::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

void Json::dump_to(std::string& out) const {
  switch (kind()) {
    case Kind::kNull:
      out += "null";
      break;
    case Kind::kBool:
      out += std::get<bool>(value_) ? "true" : "false";
      break;
    case Kind::kInt:
      fmt::format_to(std::back_inserter(out), "{}", std::get<std::int64_t>(value_));
      break;
    case Kind::kUint:
      fmt::format_to(std::back_inserter(out), "{}", std::get<std::uint64_t>(value_));
      break;
    case Kind::kDouble:
      dump_double(std::get<double>(value_), out);
      break;
    case Kind::kString:
      dump_string(std::get<std::string>(value_), out);
      break;
    case Kind::kArray: {
      out.push_back('[');
      bool first = true;
      for (const auto& element : std::get<Array>(value_)) {
        if (!first) out.push_back(',');
        first = false;
        element.dump_to(out);
      }
      out.push_back(']');
      break;
    }
    case Kind::kObject: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, member] : std::get<Object>(value_)) {
        if (!first) out.push_back(',');
        first = false;
        dump_string(key, out);
        out.push_back(':');
        member.dump_to(out);
      }
      out.push_back('}');
      break;
    }
  }
}

}  // namespace dpipe::io

namespace dpipe {

void Serializer<io::Json>::write(ByteWriter& writer, const io::Json& value) {
  using Kind = io::Json::Kind;
  writer.write(static_cast<std::uint8_t>(value.kind()));
  switch (value.kind()) {
    case Kind::kNull:
      break;
    case Kind::kBool:
      writer.write(value.as_bool());
      break;
    case Kind::kInt:
      writer.write(value.as_int());
      break;
    case Kind::kUint:
      writer.write(value.as_uint());
      break;
    case Kind::kDouble:
      writer.write(value.as_double());
      break;
    case Kind::kString:
      writer.write(value.as_string());
      break;
    case Kind::kArray:
      writer.write_size(value.size());
      for (const auto& element : value.as_array()) write(writer, element);
      break;
    case Kind::kObject:
      writer.write_size(value.size());
      for (const auto& [key, member] : value.as_object()) {
        writer.write(key);
        write(writer, member);
      }
      break;
  }
}

io::Json Serializer<io::Json>::read(ByteReader& reader) { return io::read_json(reader, 0); }

}  // namespace dpipe

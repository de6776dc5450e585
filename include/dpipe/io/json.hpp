#pragma once
/// \file
/// dpipe::io::Json: an owning JSON value, what `io::parse_jsonl()` and `io::parse_json_files()`
/// yield. Null, bool, integer (int64, or uint64 above INT64_MAX), double, string, array and object
/// (members in document order). Accessors throw io::JsonError naming what was expected and what was
/// found; a Serializer lets values cross from worker processes.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <dpipe/core/error.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::io {

/// A Json value used as what it is not: the wrong kind ("expected an object, got an array"), a
/// missing key ("no key 'label'"), an index out of range, text that is not JSON (Json::parse).
class JsonError : public Error {
 public:
  using Error::Error;
};

/// An owning JSON value. Integers are int64 unless they only fit uint64 (above INT64_MAX), so one
/// number has one representation: Json(5u) == Json(5). An object keeps its members in document
/// order and keeps duplicate keys: size() and iteration see every member, lookups (operator[],
/// find) find the last one, as Python's json.loads keeps the last. Lookups in an object are linear
/// in its size. Thread-safety: as a standard container (const members may be called concurrently).
class Json {
 public:
  /// The kinds of value, in the order of the variant's alternatives.
  enum class Kind : std::uint8_t { kNull, kBool, kInt, kUint, kDouble, kString, kArray, kObject };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;

  /// null.
  Json() noexcept = default;
  Json(std::nullptr_t /*null*/) noexcept {}  // NOLINT(google-explicit-constructor): as a literal
  /// A bool (a template, so that pointers do not convert to it).
  template <std::same_as<bool> B>
  Json(B value) noexcept : value_(static_cast<bool>(value)) {}  // NOLINT(google-explicit-constructor)
  /// An integer: int64, or uint64 for an unsigned value above INT64_MAX.
  template <std::integral I>
  requires(!std::same_as<I, bool>) Json(I value)
  noexcept {  // NOLINT(google-explicit-constructor)
    if constexpr (std::is_unsigned_v<I>) {
      if (static_cast<std::uint64_t>(value) > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        value_ = static_cast<std::uint64_t>(value);
        return;
      }
    }
    value_ = static_cast<std::int64_t>(value);
  }
  Json(double value) noexcept : value_(value) {}                  // NOLINT(google-explicit-constructor)
  Json(std::string value) noexcept : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Json(std::string_view value) : value_(std::in_place_type<std::string>, value) {}  // NOLINT
  Json(const char* value) : value_(std::in_place_type<std::string>, value) {}       // NOLINT
  Json(Array value) noexcept : value_(std::move(value)) {}   // NOLINT(google-explicit-constructor)
  Json(Object value) noexcept : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)

  /// An array of `elements`: Json::array({1, "two", nullptr}).
  [[nodiscard]] static Json array(std::initializer_list<Json> elements = {}) { return Json(Array(elements)); }
  /// An object of `members`, in this order: Json::object({{"id", 7}, {"tags", Json::array({"a"})}}).
  [[nodiscard]] static Json object(std::initializer_list<Member> members = {}) { return Json(Object(members)); }

  /// Parses one JSON document (simdjson, UTF-8 checked); JsonError "not valid JSON:
  /// <simdjson's reason>" otherwise. Thread-safety: any thread (one parser per thread).
  [[nodiscard]] static Json parse(std::string_view text);

  [[nodiscard]] Kind kind() const noexcept { return static_cast<Kind>(value_.index()); }
  /// The kind as messages name it: "null", "a bool", "an integer", "a double", "a string",
  /// "an array", "an object".
  [[nodiscard]] std::string_view kind_name() const noexcept { return kind_name(kind()); }
  /// How messages name `kind`.
  [[nodiscard]] static std::string_view kind_name(Kind kind) noexcept;

  [[nodiscard]] bool is_null() const noexcept { return kind() == Kind::kNull; }
  [[nodiscard]] bool is_bool() const noexcept { return kind() == Kind::kBool; }
  /// An integer that fits int64 (as_int() succeeds).
  [[nodiscard]] bool is_int() const noexcept { return kind() == Kind::kInt; }
  /// A non-negative integer (as_uint() succeeds).
  [[nodiscard]] bool is_uint() const noexcept {
    return kind() == Kind::kUint || (kind() == Kind::kInt && std::get<std::int64_t>(value_) >= 0);
  }
  /// A number written with a fraction or an exponent ("1.0", "1e3").
  [[nodiscard]] bool is_double() const noexcept { return kind() == Kind::kDouble; }
  /// Any number (as_double() succeeds).
  [[nodiscard]] bool is_number() const noexcept {
    return kind() == Kind::kInt || kind() == Kind::kUint || kind() == Kind::kDouble;
  }
  [[nodiscard]] bool is_string() const noexcept { return kind() == Kind::kString; }
  [[nodiscard]] bool is_array() const noexcept { return kind() == Kind::kArray; }
  [[nodiscard]] bool is_object() const noexcept { return kind() == Kind::kObject; }

  /// The bool; JsonError "expected a bool, got ..." otherwise.
  [[nodiscard]] bool as_bool() const;
  /// The integer; JsonError for another kind, or an integer above INT64_MAX.
  [[nodiscard]] std::int64_t as_int() const;
  /// The non-negative integer; JsonError for another kind, or a negative integer.
  [[nodiscard]] std::uint64_t as_uint() const;
  /// The number; an integer converts (the nearest double).
  [[nodiscard]] double as_double() const;
  /// The string (UTF-8, escapes decoded); JsonError otherwise. Move from the mutable one to take it.
  [[nodiscard]] const std::string& as_string() const;
  [[nodiscard]] std::string& as_string();
  /// The elements; JsonError otherwise. Iterate them: `for (const Json& e : value.as_array())`.
  [[nodiscard]] const Array& as_array() const;
  [[nodiscard]] Array& as_array();
  /// The members in document order; `for (const auto& [key, member] : value.as_object())`.
  [[nodiscard]] const Object& as_object() const;
  [[nodiscard]] Object& as_object();

  /// The member `key` (the last one when the key repeats); JsonError "expected an object, got
  /// ..." or "no key '<key>'". Never inserts.
  [[nodiscard]] const Json& operator[](std::string_view key) const;
  [[nodiscard]] Json& operator[](std::string_view key);
  /// Element `index`; JsonError "expected an array, got ..." or "index 3 out of range: the array
  /// has 3 elements".
  [[nodiscard]] const Json& operator[](std::size_t index) const;
  [[nodiscard]] Json& operator[](std::size_t index);
  /// The member `key` (the last one when the key repeats), or nullptr when there is none;
  /// JsonError when this is not an object.
  [[nodiscard]] const Json* find(std::string_view key) const;
  [[nodiscard]] Json* find(std::string_view key);

  /// The number of elements of an array or members of an object (duplicates included); JsonError
  /// "expected an array or an object, got ..." otherwise.
  [[nodiscard]] std::size_t size() const;

  /// Compact JSON text: no spaces, members in order, strings UTF-8 with '"', '\\' and control
  /// characters escaped, doubles in their shortest round-trip form with a ".0" when they would
  /// read as integers ("1.0", "1e+16"), infinities and NaN as Python writes them ("Infinity",
  /// "NaN").
  [[nodiscard]] std::string dump() const;
  /// Appends dump()'s text to `out`.
  void dump_to(std::string& out) const;

  /// Same kinds, same values, same members in the same order (1 and 1.0 differ, as their dumps do).
  friend bool operator==(const Json& a, const Json& b) noexcept { return a.value_ == b.value_; }

 private:
  /// Throws JsonError "expected <expected>, got <kind_name()>".
  [[noreturn]] void wrong_kind(std::string_view expected) const;

  std::variant<std::nullptr_t, bool, std::int64_t, std::uint64_t, double, std::string, Array, Object> value_{};
};

}  // namespace dpipe::io

namespace dpipe {

/// Json values cross process boundaries and go into checkpoints: a kind byte, then the value. A
/// value nested deeper than 1024 levels does not decode (SerializationError).
template <>
struct Serializer<io::Json> {
  static constexpr std::size_t kMinSize = 1;
  static void write(ByteWriter& writer, const io::Json& value);
  static io::Json read(ByteReader& reader);
};

}  // namespace dpipe

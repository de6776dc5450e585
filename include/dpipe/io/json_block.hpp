#pragma once
/// \file
/// dpipe::io::JsonBlock: JSON lines of one file parsed together, what
/// `io::parse_jsonl(options, io::in_blocks(n))` yields, and io::JsonView, a value read in place in
/// it. One buffer of text and one of parsed values per block instead of an owning io::Json per
/// line; a record becomes an io::Json on demand (JsonView::to_json()).

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <dpipe/io/detail/index_iterator.hpp>
#include <dpipe/io/json.hpp>
#include <dpipe/io/line_block.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::io {

class JsonBlock;
struct JsonMemberView;
template <class Item>
class JsonViewIterator;
template <class Item>
struct JsonViewRange;
namespace detail {
class JsonDecoder;
}  // namespace detail

/// A JSON value read in place in a JsonBlock: a view, valid while its block lives unchanged
/// (neither destroyed, moved from nor assigned to), and cheap to copy. It reads as io::Json does,
/// with the same kinds, the same JsonError messages and the same rules (the last of repeated keys
/// wins a lookup), but hands out strings as string_views into the block, and elements and members
/// as views; to_json() makes the owning Json. Lookups and indexing walk the value (linear in its
/// size). Thread-safety: const; any thread while the block is not changed.
class JsonView {
 public:
  [[nodiscard]] Json::Kind kind() const noexcept;
  /// How messages name the kind ("an object"; Json::kind_name()).
  [[nodiscard]] std::string_view kind_name() const noexcept { return Json::kind_name(kind()); }
  [[nodiscard]] bool is_null() const noexcept { return kind() == Json::Kind::kNull; }
  [[nodiscard]] bool is_bool() const noexcept { return kind() == Json::Kind::kBool; }
  [[nodiscard]] bool is_number() const noexcept;
  [[nodiscard]] bool is_string() const noexcept { return kind() == Json::Kind::kString; }
  [[nodiscard]] bool is_array() const noexcept { return kind() == Json::Kind::kArray; }
  [[nodiscard]] bool is_object() const noexcept { return kind() == Json::Kind::kObject; }

  /// As Json's accessors, with their JsonErrors.
  [[nodiscard]] bool as_bool() const;
  [[nodiscard]] std::int64_t as_int() const;
  [[nodiscard]] std::uint64_t as_uint() const;
  [[nodiscard]] double as_double() const;
  /// The string (UTF-8, escapes decoded), a view into the block.
  [[nodiscard]] std::string_view as_string() const;

  /// The member `key` (the last one when the key repeats); JsonError "expected an object, got
  /// ..." or "no key '<key>'".
  [[nodiscard]] JsonView operator[](std::string_view key) const;
  /// Element `index`; JsonError "expected an array, got ..." or "index 3 out of range: the array
  /// has 3 elements".
  [[nodiscard]] JsonView operator[](std::size_t index) const;
  /// The member `key` (the last one when the key repeats), or std::nullopt; JsonError when this is
  /// not an object.
  [[nodiscard]] std::optional<JsonView> find(std::string_view key) const;
  /// The number of elements or members; JsonError "expected an array or an object, got ...".
  [[nodiscard]] std::size_t size() const;

  /// An array's elements in order: `for (JsonView element : value.elements())`; JsonError
  /// otherwise.
  [[nodiscard]] JsonViewRange<JsonView> elements() const;
  /// An object's members in document order: `for (auto [key, member] : value.members())`;
  /// JsonError otherwise.
  [[nodiscard]] JsonViewRange<JsonMemberView> members() const;

  /// The owning Json of this value (Json::parse of its text gives the same).
  [[nodiscard]] Json to_json() const;

 private:
  friend class JsonBlock;
  template <class Item>
  friend class JsonViewIterator;
  JsonView(const std::uint64_t* tape, const char* strings, std::size_t index) noexcept
      : tape_(tape), strings_(strings), index_(index) {}
  /// Throws JsonError "expected <expected>, got <kind_name()>".
  [[noreturn]] void wrong_kind(std::string_view expected) const;
  /// The index of this container's first child, after checking its kind (`object`: an object).
  [[nodiscard]] std::size_t first_child(bool object) const;
  /// The value at `index` of the same record.
  [[nodiscard]] JsonView child(std::size_t index) const noexcept { return {tape_, strings_, index}; }
  /// The object key at `index`.
  [[nodiscard]] std::string_view key_at(std::size_t index) const noexcept;
  /// The index of the value after the one at `index`.
  [[nodiscard]] std::size_t after(std::size_t index) const noexcept;

  const std::uint64_t* tape_;  // the record's parsed form (simdjson's DOM tape layout)
  const char* strings_;        // the record's strings: a 32-bit length, the bytes, a NUL
  std::size_t index_;          // where this value is in tape_
};

/// An object's member, as JsonView::members() yields it.
struct JsonMemberView {
  std::string_view key;
  JsonView value;
};

/// Iterates the elements (Item JsonView) or members (Item JsonMemberView) of a JsonView.
template <class Item>
class JsonViewIterator {
 public:
  using value_type = Item;
  using reference = Item;
  using difference_type = std::ptrdiff_t;
  using iterator_category = std::forward_iterator_tag;

  JsonViewIterator() = default;
  JsonViewIterator(JsonView container, std::size_t index) noexcept : container_(container), index_(index) {}

  [[nodiscard]] Item operator*() const {
    if constexpr (kMembers) {
      return {container_.key_at(index_), container_.child(index_ + 1)};
    } else {
      return container_.child(index_);
    }
  }
  JsonViewIterator& operator++() noexcept {
    index_ = container_.after(index_ + (kMembers ? 1 : 0));
    return *this;
  }
  JsonViewIterator operator++(int) noexcept {
    JsonViewIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const JsonViewIterator& other) const noexcept { return index_ == other.index_; }

 private:
  static constexpr bool kMembers = std::is_same_v<Item, JsonMemberView>;
  JsonView container_{nullptr, nullptr, 0};
  std::size_t index_ = 0;
};

/// The elements or members of a JsonView, for a range-for.
template <class Item>
struct JsonViewRange {
  JsonViewIterator<Item> first;
  JsonViewIterator<Item> last;
  [[nodiscard]] JsonViewIterator<Item> begin() const noexcept { return first; }
  [[nodiscard]] JsonViewIterator<Item> end() const noexcept { return last; }
};

/// Records of JSON lines of one file: the lines as read (a LineBlock) and each non-blank line's
/// value, parsed in one pass over the block. Record i is the value on line line(i) of path(); a
/// block never spans files; blank lines have no record, and nor have bad lines that
/// OnError::skip passed over, so line numbers may jump inside a block. The views it hands out are
/// valid while it lives unchanged. Thread-safety: as a standard container (const members may be
/// called concurrently).
class JsonBlock {
 public:
  using const_iterator = detail::IndexIterator<JsonBlock, JsonView>;

  JsonBlock() = default;

  /// The file (or URL) the lines come from.
  [[nodiscard]] const std::string& path() const noexcept { return lines_.path(); }
  /// The number of records.
  [[nodiscard]] std::size_t size() const noexcept { return records_.size(); }
  [[nodiscard]] bool empty() const noexcept { return records_.empty(); }
  /// The value of record `index` (< size()).
  [[nodiscard]] JsonView operator[](std::size_t index) const noexcept {
    const Record& record = records_[index];
    return {tape_.data() + record.tape, strings_.data() + record.strings, 1};
  }
  /// Record `index`; std::out_of_range past the end.
  [[nodiscard]] JsonView at(std::size_t index) const;
  [[nodiscard]] const_iterator begin() const noexcept { return {this, 0}; }
  [[nodiscard]] const_iterator end() const noexcept { return {this, size()}; }

  /// The line of record `index` (< size()) in path(), from 1.
  [[nodiscard]] std::uint64_t line(std::size_t index) const noexcept {
    return lines_.first_line() + records_[index].line;
  }
  /// The text of record `index`'s line.
  [[nodiscard]] std::string_view text(std::size_t index) const noexcept { return lines_[records_[index].line]; }
  /// The lines read into the block, from line lines().first_line(): blank and skipped ones too.
  [[nodiscard]] const LineBlock& lines() const noexcept { return lines_; }

  /// The same path, and records on the same lines with the same text.
  bool operator==(const JsonBlock& other) const;

 private:
  friend class detail::JsonDecoder;
  friend struct dpipe::Serializer<JsonBlock>;

  /// Where a record is: its line in lines_, and where its tape and strings start.
  struct Record {
    std::uint64_t line = 0;
    std::uint64_t tape = 0;
    std::uint64_t strings = 0;
  };

  LineBlock lines_;
  std::vector<std::uint64_t> tape_;  // the records' tapes, back to back
  std::string strings_;              // the records' strings, back to back
  std::vector<Record> records_;
};

}  // namespace dpipe::io

namespace dpipe {

/// A JsonBlock crosses from worker processes as its lines and parsed records (nothing is parsed
/// again); a block whose records do not check out does not decode (SerializationError).
template <>
struct Serializer<io::JsonBlock> {
  static constexpr std::size_t kMinSize = Serializer<io::LineBlock>::kMinSize + 24;
  static void write(ByteWriter& writer, const io::JsonBlock& block);
  static io::JsonBlock read(ByteReader& reader);
};

}  // namespace dpipe

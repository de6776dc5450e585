#pragma once
/// \file
/// LazyIterator<T, Reader>: the input iterator of IterPipe and DataLoader2. It reads lazily — the
/// next element is pulled when the iterator is compared with end() or dereferenced — so that inside
/// a range-for body exactly the elements the body received have been read, and an exception from
/// the pipeline surfaces there. Copies share their position, as input iterators do. Dereferencing
/// gives a mutable reference, so the body may move the element out.

#include <concepts>
#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include <dpipe/core/error.hpp>

namespace dpipe::detail {

/// Reader provides `bool end_is_final()` (false while the end only means "paused", so that the
/// next comparison reads again) and one of:
/// - `std::optional<T> read()`: the next element, which the iterator keeps;
/// - `T* read_in_place()`: the next element where the reader keeps it, valid until the next read,
///   or nullptr at the end; no element is moved on its way to the caller.
template <class T, class Reader>
class LazyIterator {
  static constexpr bool kInPlace = requires(Reader reader) {
    { reader.read_in_place() } -> std::same_as<T*>;
  };

 public:
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using pointer = T*;
  using iterator_category = std::input_iterator_tag;  // range-v3 reads the C++17 traits
  using iterator_concept = std::input_iterator_tag;

  LazyIterator() = default;
  explicit LazyIterator(Reader reader) : cursor_(std::make_shared<Cursor>(std::move(reader))) {}

  [[nodiscard]] T& operator*() const {
    T* element = cursor_->fetch();
    if (element == nullptr) [[unlikely]]
      throw_dereferenced_end();
    return *element;
  }
  [[nodiscard]] T* operator->() const { return &**this; }

  LazyIterator& operator++() {
    cursor_->fetch();  // consumes the current element even if it was never looked at
    cursor_->fetched = false;
    return *this;
  }
  void operator++(int) { ++*this; }

  [[nodiscard]] friend bool operator==(const LazyIterator& it, std::default_sentinel_t) {
    return !it.cursor_ || it.cursor_->fetch() == nullptr;
  }

 private:
  [[noreturn]] static void throw_dereferenced_end() {
    DPIPE_THROW(UsageError, "dereferencing an iterator at the end of its iteration");
  }

  struct Cursor {
    explicit Cursor(Reader r) : reader(std::move(r)) {}
    Reader reader;
    [[no_unique_address]] std::conditional_t<kInPlace, std::nullptr_t, std::optional<T>> kept{};
    T* current = nullptr;
    bool fetched = false;

    /// The current element, read unless it is still unconsumed; nullptr at the end.
    T* fetch() {
      if (!fetched) {
        if constexpr (kInPlace) {
          current = reader.read_in_place();
        } else {
          kept = reader.read();
          current = kept ? &*kept : nullptr;
        }
        fetched = current != nullptr || reader.end_is_final();
      }
      return current;
    }
  };

  std::shared_ptr<Cursor> cursor_;
};

}  // namespace dpipe::detail

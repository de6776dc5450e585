#pragma once
/// \file
/// LazyIterator<T, Reader>: the input iterator of IterPipe and DataLoader2. It reads lazily — the
/// next element is pulled when the iterator is compared with end() or dereferenced — so that inside
/// a range-for body exactly the elements the body received have been read, and an exception from
/// the pipeline surfaces there. Copies share their position, as input iterators do. Dereferencing
/// gives a mutable reference, so the body may move the element out.

#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>

#include <dpipe/core/error.hpp>

namespace dpipe::detail {

/// Reader provides `std::optional<T> read()` and `bool end_is_final()` (false while the end only
/// means "paused", so that the next comparison reads again).
template <class T, class Reader>
class LazyIterator {
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
    auto& element = cursor_->fetch();
    if (!element) DPIPE_THROW(UsageError, "dereferencing an iterator at the end of its iteration");
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
    return !it.cursor_ || !it.cursor_->fetch().has_value();
  }

 private:
  struct Cursor {
    explicit Cursor(Reader r) : reader(std::move(r)) {}
    Reader reader;
    std::optional<T> current;
    bool fetched = false;

    /// The current element, read unless it is still unconsumed; std::nullopt at the end.
    std::optional<T>& fetch() {
      if (!fetched) {
        current = reader.read();
        fetched = current.has_value() || reader.end_is_final();
      }
      return current;
    }
  };

  std::shared_ptr<Cursor> cursor_;
};

}  // namespace dpipe::detail

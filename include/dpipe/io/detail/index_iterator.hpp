#pragma once
/// \file
/// IndexIterator: a forward iterator over a container that hands out values by index (the lines
/// of a LineBlock, the rows of a CsvBlock and the fields of a row).

#include <cstddef>
#include <iterator>

namespace dpipe::io::detail {

/// Iterates `(*container)[0 .. size)` by value (`Value`, a view). Valid while the container lives
/// unchanged. Thread-safety: as the container's const members.
template <class Container, class Value>
class IndexIterator {
 public:
  using value_type = Value;
  using reference = Value;
  using difference_type = std::ptrdiff_t;
  using iterator_category = std::forward_iterator_tag;

  IndexIterator() = default;
  IndexIterator(const Container* container, std::size_t index) noexcept : container_(container), index_(index) {}

  Value operator*() const { return (*container_)[index_]; }
  IndexIterator& operator++() noexcept {
    ++index_;
    return *this;
  }
  IndexIterator operator++(int) noexcept {
    IndexIterator before = *this;
    ++index_;
    return before;
  }
  bool operator==(const IndexIterator& other) const noexcept = default;

 private:
  const Container* container_ = nullptr;
  std::size_t index_ = 0;
};

}  // namespace dpipe::io::detail

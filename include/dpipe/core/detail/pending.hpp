#pragma once
/// \file
/// Pending<T>: elements a node has produced but not yet handed out (a filter's read-ahead matches,
/// the rest of a flatmap expansion, a mux round), with their checkpoint encoding.

#include <cstddef>
#include <optional>
#include <ranges>
#include <string_view>
#include <utility>
#include <vector>

#include <dpipe/core/detail/buffered_elements.hpp>

namespace dpipe::detail {

/// A queue of elements consumed front to back. A copy is empty: the queue belongs to one
/// iteration and a cloned node starts a fresh one, so a node holding move-only elements stays
/// clonable. Thread-safety: none.
template <class T>
class Pending {
 public:
  Pending() = default;
  Pending(const Pending& /*other*/) noexcept {}
  Pending(Pending&&) noexcept = default;
  Pending& operator=(const Pending& other) {
    if (this != &other) clear();
    return *this;
  }
  Pending& operator=(Pending&&) noexcept = default;
  ~Pending() = default;

  [[nodiscard]] bool empty() const noexcept { return next_ == elements_.size(); }
  [[nodiscard]] std::size_t size() const noexcept { return elements_.size() - next_; }

  /// Replaces the contents with `elements`.
  void assign(std::vector<T> elements) {
    elements_ = std::move(elements);
    next_ = 0;
  }
  void clear() noexcept {
    elements_.clear();
    next_ = 0;
  }
  /// The storage to refill in place: clears the queue and returns its (empty) vector.
  std::vector<T>& refill() {
    clear();
    return elements_;
  }

  /// Appends `element` at the back.
  void push(T element) { elements_.push_back(std::move(element)); }

  /// Removes and returns the first element. REQUIRES: !empty().
  T take() { return std::move(elements_[next_++]); }

  /// Moves up to `n` elements to the end of `out`; returns how many.
  std::size_t take_into(std::vector<T>& out, std::size_t n) {
    const std::size_t count = std::min(n, size());
    const auto first = elements_.begin() + static_cast<std::ptrdiff_t>(next_);
    out.insert(out.end(), std::make_move_iterator(first),
               std::make_move_iterator(first + static_cast<std::ptrdiff_t>(count)));
    next_ += count;
    return count;
  }

  /// Writes the elements not yet taken as field `field`.
  void save_state(StateWriter& writer, std::string_view field, const DataPipe& node) const {
    write_elements<T>(writer, field, node,
                      std::ranges::subrange(elements_.begin() + static_cast<std::ptrdiff_t>(next_), elements_.end()));
  }
  /// Reads what save_state() wrote.
  void load_state(const StateReader& reader, std::string_view field, const DataPipe& node) {
    assign(read_elements<T>(reader, field, node));
  }

 private:
  std::vector<T> elements_;
  std::size_t next_ = 0;
};

}  // namespace dpipe::detail

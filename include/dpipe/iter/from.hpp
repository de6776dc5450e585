#pragma once
/// \file
/// `iter::from(range)` (torchdata's IterableWrapper): a source node over any input range —
/// containers, std views, range-v3 views, generators.
///
/// The node keeps its own copy of the range (an lvalue container is copied, an rvalue moved);
/// wrap `std::views::all(v)` to iterate a container in place. Ranges that can be iterated as const
/// are held immutable and shared between graph clones (and worker processes), so a 10M-element
/// vector is never copied by DataLoader2. Ranges that are only input ranges (single-pass) can be
/// iterated once; a second iteration throws.

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

#include <dpipe/core/concepts.hpp>
#include <dpipe/core/detail/range_access.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/iter/detail/fusion.hpp>

namespace dpipe::detail {

/// How iter::from iterates the range it keeps: as const when it can (then the range is shared).
template <class R>
using kept_range_t = std::conditional_t<any_input_range<const R>, const R, R>;

/// What iterating the kept range yields.
template <class R>
using kept_reference_t = decltype(*RangeAccess<kept_range_t<R>>::begin(std::declval<kept_range_t<R>&>()));

}  // namespace dpipe::detail

namespace dpipe::iter {

/// Ranges `iter::from` accepts: it makes each element it yields from what the range's iterator
/// yields, and keeps the range for the next epoch. A container of copyable elements, a view that
/// makes its values (iota, transform) or a single-pass range qualifies; a container of move-only
/// elements does not (make those elements in a map after the source instead).
template <class R>
concept from_range =
    source_range<R> && std::constructible_from<range_element_t<R>, detail::kept_reference_t<std::remove_cvref_t<R>>>;

/// Yields the elements of a range. Checkpoint state: the position (restore is O(1) for
/// random-access ranges, a walk over the skipped elements otherwise).
template <source_range R>
class IterableWrapper final : public IterDataPipe<range_element_t<R>> {
  using T = range_element_t<R>;
  using Viewed = detail::kept_range_t<R>;
  static constexpr bool kShared = std::is_const_v<Viewed>;
  using Access = detail::RangeAccess<Viewed>;
  using Iterator = typename Access::iterator;
  using Storage = std::conditional_t<kShared, std::shared_ptr<const R>, R>;

 public:
  static constexpr std::string_view kName = "from";

  template <class Arg>
  explicit IterableWrapper(Arg&& range)
      : IterDataPipe<T>(std::string(kName)), storage_(store(std::forward<Arg>(range))) {}

  /// Copies the configuration (the shared range, or a copy of a non-shareable one) but not the
  /// position: the copy starts from the beginning.
  IterableWrapper(const IterableWrapper& other) : IterDataPipe<T>(other), storage_(other.storage_) {}

  void for_each_input(const InputVisitor& /*visit*/) override {}
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<IterableWrapper>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    if constexpr (Access::kSized) return {{"length", std::to_string(Access::size(range()))}};
    return {};
  }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("position", std::uint64_t{position_});
    return true;
  }

  void load_state(const StateReader& reader) override {
    const std::size_t position = reader.read<std::uint64_t>("position");
    if constexpr (Access::kSized) {
      const auto size = static_cast<std::size_t>(Access::size(range()));
      if (position > size) {
        DPIPE_THROW(StateError, "{}: saved position {} is beyond the range's {} elements", this->label(), position,
                    size);
      }
    }
    if constexpr (!Access::kForward) {
      DPIPE_THROW(StateError, "{}: a single-pass range cannot be restored; wrap a container or a forward range",
                  this->label());
    } else {
      start();
      advance(position);
    }
  }

 protected:
  void reset_impl() override {
    if constexpr (!Access::kForward) {
      if (iterated_) {
        DPIPE_THROW(UsageError,
                    "{}: the source range is single-pass (an input range that is not a forward "
                    "range) and was already iterated; wrap a container or a forward range to iterate "
                    "it again",
                    this->label());
      }
    }
    start();
  }

  std::optional<T> next_impl() override {
    if (!it_ || *it_ == Access::end(range())) return std::nullopt;
    std::optional<T> element(std::in_place, **it_);
    ++*it_;
    ++position_;
    return element;
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    if (!it_) return 0;
    auto& it = *it_;
    const auto last = Access::end(range());
    std::size_t produced = 0;
    if constexpr (Access::kRandomAccess && Access::kSizedSentinel && std::is_default_constructible_v<T>) {
      const auto available = Access::distance(it, last);
      produced = std::min(n, available);
      const std::size_t first = out.size();
      out.resize(first + produced);
      T* destination = out.data() + first;
      const Iterator first_read = it;
      for (std::size_t i = 0; i < produced; ++i) destination[i] = first_read[static_cast<std::ptrdiff_t>(i)];
      Access::advance(it, produced);
    } else {
      for (; produced < n && it != last; ++produced, ++it) out.emplace_back(*it);
    }
    position_ += produced;
    return produced;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    if constexpr (Access::kSized) {
      return static_cast<std::size_t>(Access::size(range()));
    } else {
      return std::nullopt;
    }
  }

 private:
  template <class Arg>
  static Storage store(Arg&& range) {
    if constexpr (kShared) {
      return std::make_shared<const R>(std::forward<Arg>(range));
    } else {
      return R(std::forward<Arg>(range));
    }
  }

  Viewed& range() const {
    if constexpr (kShared) {
      return *storage_;
    } else {
      return const_cast<R&>(storage_);  // non-const-iterable views are iterated through a mutable ref
    }
  }

  void start() {
    it_.emplace(Access::begin(range()));
    position_ = 0;
    iterated_ = true;
  }

  void advance(std::size_t count) {
    if constexpr (Access::kRandomAccess) {
      Access::advance(*it_, count);
    } else {
      const auto last = Access::end(range());
      for (std::size_t i = 0; i < count; ++i) {
        if (*it_ == last)
          DPIPE_THROW(StateError, "{}: saved position {} is beyond the range's end", this->label(), count);
        ++*it_;
      }
    }
    position_ = count;
  }

  template <class, class, bool, class...>
  friend class detail::FusedRunOf;  // a fused run reads the range itself

  Storage storage_;
  std::optional<Iterator> it_;
  std::size_t position_ = 0;
  bool iterated_ = false;
};

/// A source over `range` (see IterableWrapper). Returns an IterPipe<range_element_t<R>> (a handle
/// whose maps and filters run as one loop with the source: see iter/detail/fusion.hpp).
template <from_range R>
[[nodiscard]] auto from(R&& range) {
  using Node = IterableWrapper<std::remove_cvref_t<R>>;
  return detail::ElementwisePipe<Node, range_element_t<R>>(make_iter<Node>(std::forward<R>(range)));
}

/// A source over the listed values: `iter::from({1, 2, 3})`.
template <element T>
[[nodiscard]] auto from(std::initializer_list<T> values) {
  return from(std::vector<T>(values));
}

}  // namespace dpipe::iter

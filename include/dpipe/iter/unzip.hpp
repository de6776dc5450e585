#pragma once
/// \file
/// `unzip()` and `unzip(n, buffer_size, columns_to_skip)` (torchdata's UnZipper): one pipe per
/// column of tuple or sequence elements. Like torchdata it is a fork: the columns share a buffer
/// of whole elements, a column may run at most `buffer_size` elements ahead of the slowest, and the
/// overflow error is fork's. Skip columns you will not read, or the buffer fills up.

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <dpipe/core/detail/functional.hpp>
#include <dpipe/iter/fork.hpp>

namespace dpipe {
namespace detail {

/// Item `index` of a sequence element; throws InvalidArgument when the element is shorter.
struct ColumnOf {
  std::size_t index;
  template <class Sequence>
  auto operator()(Sequence&& sequence) const {
    if (index >= sequence.size()) {
      DPIPE_THROW(InvalidArgument, "unzip: an element has {} items, so column {} does not exist", sequence.size(),
                  index);
    }
    return std::move(sequence[index]);
  }
};

template <class T, class Container, std::size_t... I>
auto tuple_children(const std::shared_ptr<Container>& container, std::index_sequence<I...>) {
  return std::tuple<IterPipe<std::tuple_element_t<I, T>>...>(IterPipe<std::tuple_element_t<I, T>>(
      std::make_shared<ChildPipe<std::tuple_element_t<I, T>, Container, TupleElement<I>>>(container, I))...);
}

}  // namespace detail

template <class T>
template <class U>
requires(is_tuple_like<U>&& copyable_element<U>) auto IterPipe<T>::unzip(std::size_t buffer_size) const {
  constexpr std::size_t kColumns = std::tuple_size_v<T>;
  using Container = iter::Forker<T>;
  auto container = std::make_shared<Container>(*this, kColumns, buffer_size, std::string(Container::kUnzipName));
  return detail::tuple_children<T>(container, std::make_index_sequence<kColumns>{});
}

template <class T>
template <class U>
requires((is_vector<U> || is_std_array<U>)&&copyable_element<U>)
    std::vector<IterPipe<range_element_t<U>>> IterPipe<T>::unzip(std::size_t n, std::size_t buffer_size,
                                                                 const std::vector<std::size_t>& columns_to_skip)
const {
  std::vector<std::size_t> columns;
  for (std::size_t column = 0; column < n; ++column) {
    if (std::find(columns_to_skip.begin(), columns_to_skip.end(), column) == columns_to_skip.end()) {
      columns.push_back(column);
    }
  }
  if (columns.empty()) {
    DPIPE_THROW(InvalidArgument,
                "All instances are being filtered out in UnZipperIterDataPipe. Please checkthe input "
                "`sequence_length` and `columns_to_skip`.");
  }
  using Container = iter::Forker<T>;
  auto container = std::make_shared<Container>(*this, columns.size(), buffer_size, std::string(Container::kUnzipName));
  return detail::make_children<range_element_t<U>>(container,
                                                   [&](std::size_t child) { return detail::ColumnOf{columns[child]}; });
}

namespace iter {

/// `src | iter::unzip()` for tuple elements.
[[nodiscard]] inline auto unzip(std::size_t buffer_size = 1000) {
  return PipeAdaptor{[=](const auto& source) { return source.unzip(buffer_size); }};
}

}  // namespace iter
}  // namespace dpipe

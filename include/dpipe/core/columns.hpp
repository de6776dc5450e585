#pragma once
/// \file
/// Columns<S>: a batch of a struct S that declares DPIPE_FIELDS, as a struct of arrays (one vector
/// per field), the way a trainer feeds tensors. `collate()` turns a `std::vector<S>` into one.

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dpipe/core/detail/field_index.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/fields.hpp>
#include <dpipe/core/type_name.hpp>

namespace dpipe {

namespace detail {
/// std::tuple<std::vector<F>...> for the references std::tie(fields...) returns.
template <class References>
struct ColumnsTuple;
template <class... Fs>
struct ColumnsTuple<std::tuple<Fs&...>> {
  using type = std::tuple<std::vector<Fs>...>;
};
}  // namespace detail

/// The rows of a batch of S, stored by field: column I holds field I (in DPIPE_FIELDS order) of
/// every row, in row order. Thread-safety: a value.
template <has_fields S>
class Columns {
 public:
  using Tuple = typename detail::ColumnsTuple<decltype(std::declval<S&>().dpipe_fields())>::type;
  static constexpr std::size_t kFields = std::tuple_size_v<Tuple>;
  static_assert(kFields > 0, "Columns<S> needs at least one field in S's DPIPE_FIELDS");

  Columns() = default;
  /// Moves each field of each row into its column.
  explicit Columns(std::vector<S> rows) {
    for_each_index([&]<std::size_t I>() { std::get<I>(columns_).reserve(rows.size()); });
    for (auto& row : rows) {
      auto fields = row.dpipe_fields();
      for_each_index([&]<std::size_t I>() { std::get<I>(columns_).push_back(std::move(std::get<I>(fields))); });
    }
  }

  /// The number of rows.
  [[nodiscard]] std::size_t size() const noexcept { return std::get<0>(columns_).size(); }

  /// Column I: field I of every row.
  template <std::size_t I>
  [[nodiscard]] auto& get() noexcept {
    return std::get<I>(columns_);
  }
  template <std::size_t I>
  [[nodiscard]] const auto& get() const noexcept {
    return std::get<I>(columns_);
  }

  /// The column of `member`: `batch[&Sample::label]`. Throws InvalidArgument when `member` is not
  /// one of S's DPIPE_FIELDS.
  template <class M>
  [[nodiscard]] std::vector<M>& operator[](M S::*member) {
    return *static_cast<std::vector<M>*>(column_of(member));
  }
  template <class M>
  [[nodiscard]] const std::vector<M>& operator[](M S::*member) const {
    return *static_cast<const std::vector<M>*>(const_cast<Columns&>(*this).column_of(member));
  }

  /// Every column.
  [[nodiscard]] Tuple& columns() noexcept { return columns_; }
  [[nodiscard]] const Tuple& columns() const noexcept { return columns_; }

  bool operator==(const Columns&) const = default;

  // The checkpoint and worker encoding (DPIPE_FIELDS, spelled out to keep this header light).
  auto dpipe_fields() { return std::tie(columns_); }
  auto dpipe_fields() const { return std::tie(columns_); }

 private:
  template <class Visit>
  static void for_each_index(Visit&& visit) {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (visit.template operator()<I>(), ...); }
    (std::make_index_sequence<kFields>{});
  }

  /// The column of `member`.
  template <class M>
  void* column_of(M S::*member) {
    const std::size_t index = detail::field_index(member);
    void* column = nullptr;
    for_each_index([&]<std::size_t I>() {
      if constexpr (std::is_same_v<std::tuple_element_t<I, Tuple>, std::vector<M>>) {
        if (index == I) column = &std::get<I>(columns_);
      }
    });
    if (column == nullptr) {
      DPIPE_THROW(InvalidArgument, "Columns<{}>: the member is not one of the fields {} declares with DPIPE_FIELDS",
                  type_name<S>(), type_name<S>());
    }
    return column;
  }

  Tuple columns_;
};

}  // namespace dpipe

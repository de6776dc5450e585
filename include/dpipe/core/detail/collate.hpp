#pragma once
/// \file
/// DefaultCollate: `collate()`'s default conversion (torchdata's default_collate, without tensors):
/// a batch of tuples becomes a tuple of vectors, a batch of pairs a pair of vectors, and a batch of
/// a DPIPE_FIELDS struct S a Columns<S> (a vector per field).

#include <cstddef>
#include <tuple>
#include <utility>
#include <vector>

#include <dpipe/core/columns.hpp>

namespace dpipe::detail {

struct DefaultCollate {
  template <class... Ts>
  std::tuple<std::vector<Ts>...> operator()(std::vector<std::tuple<Ts...>> batch) const {
    return columns(std::move(batch), std::index_sequence_for<Ts...>{});
  }

  template <class A, class B>
  std::pair<std::vector<A>, std::vector<B>> operator()(std::vector<std::pair<A, B>> batch) const {
    std::pair<std::vector<A>, std::vector<B>> result;
    result.first.reserve(batch.size());
    result.second.reserve(batch.size());
    for (auto& [first, second] : batch) {
      result.first.push_back(std::move(first));
      result.second.push_back(std::move(second));
    }
    return result;
  }

  template <has_fields S>
  Columns<S> operator()(std::vector<S> batch) const {
    return Columns<S>(std::move(batch));
  }

 private:
  template <class... Ts, std::size_t... I>
  static std::tuple<std::vector<Ts>...> columns(std::vector<std::tuple<Ts...>> batch, std::index_sequence<I...>) {
    std::tuple<std::vector<Ts>...> result;
    (std::get<I>(result).reserve(batch.size()), ...);
    for (auto& row : batch) (std::get<I>(result).push_back(std::move(std::get<I>(row))), ...);
    return result;
  }
};

}  // namespace dpipe::detail

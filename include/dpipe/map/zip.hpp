#pragma once
/// \file
/// Map-style `zip(others...)` (torchdata's map Zipper): key k holds the tuple of each input's value
/// at k; the size is the smallest input's.

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include <dpipe/core/map_pipe.hpp>

namespace dpipe::map {

template <class... Vs>
class Zipper final : public MapDataPipe<std::size_t, std::tuple<Vs...>> {
  using Tuple = std::tuple<Vs...>;

 public:
  static constexpr std::string_view kName = "zip";

  explicit Zipper(const MapPipe<std::size_t, Vs>&... sources)
      : MapDataPipe<std::size_t, Tuple>(std::string(kName)), sources_(MapInput<std::size_t, Vs>(sources.ptr())...) {}

  void for_each_input(const InputVisitor& visit) override {
    std::apply([&](auto&... input) { (visit(input), ...); }, sources_);
  }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Zipper>(*this); }

 protected:
  Tuple get_impl(const std::size_t& key) override {
    if (key >= size_impl()) {
      DPIPE_THROW(KeyError, "Index {} is out of range for one of the input MapDataPipes {}.", key, this->label());
    }
    // Braced initialization reads the inputs left to right.
    return std::apply([&](auto&... input) { return Tuple{input.get(key)...}; }, sources_);
  }

  [[nodiscard]] std::size_t size_impl() const override {
    return std::apply([](const auto&... input) { return std::min({input.size()...}); }, sources_);
  }

 private:
  std::tuple<MapInput<std::size_t, Vs>...> sources_;
};

/// `src | map::zip(others...)`.
template <class... Us>
[[nodiscard]] auto zip(MapPipe<std::size_t, Us>... others) {
  return PipeAdaptor{[=](const auto& source) { return source.zip(others...); }};
}

}  // namespace dpipe::map

namespace dpipe {

template <class K, class V>
template <class... Us>
requires std::same_as<K, std::size_t> MapPipe<std::size_t, std::tuple<V, Us...>> MapPipe<K, V>::zip(
    const MapPipe<std::size_t, Us>&... others)
const { return make_map<map::Zipper<V, Us...>>(*this, others...); }

}  // namespace dpipe

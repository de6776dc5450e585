#pragma once
/// \file
/// Map-style `concat(others...)` (torchdata's map Concater): keys 0 .. total-1 run through each
/// index-keyed input in turn.

#include <memory>
#include <string>
#include <vector>

#include <dpipe/core/map_pipe.hpp>

namespace dpipe::map {

template <class V>
class Concater final : public MapDataPipe<std::size_t, V> {
 public:
  static constexpr std::string_view kName = "concat";

  explicit Concater(const std::vector<MapPipe<std::size_t, V>>& sources)
      : MapDataPipe<std::size_t, V>(std::string(kName)) {
    if (sources.empty()) DPIPE_THROW(InvalidArgument, "Expected at least one DataPipe, but got nothing");
    for (const auto& source : sources) sources_.emplace_back(source.ptr());
  }

  void for_each_input(const InputVisitor& visit) override {
    for (auto& source : sources_) visit(source);
  }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Concater>(*this); }

 protected:
  V get_impl(const std::size_t& key) override {
    std::size_t offset = 0;
    for (auto& source : sources_) {
      const std::size_t size = source.size();
      if (key - offset < size) return source.get(key - offset);
      offset += size;
      if (key < offset) break;
    }
    DPIPE_THROW(KeyError, "Index {} is out of range.", key);
  }

  [[nodiscard]] std::size_t size_impl() const override {
    std::size_t total = 0;
    for (const auto& source : sources_) total += source.size();
    return total;
  }

 private:
  std::vector<MapInput<std::size_t, V>> sources_;
};

/// `src | map::concat(others...)`.
template <class V, class... Ps>
[[nodiscard]] auto concat(MapPipe<std::size_t, V> first, Ps... rest) {
  return PipeAdaptor{[=](const MapPipe<std::size_t, V>& source) { return source.concat(first, rest...); }};
}

}  // namespace dpipe::map

namespace dpipe {

template <class K, class V>
template <class... Ps>
requires(std::same_as<K, std::size_t> &&
         (std::same_as<Ps, MapPipe<K, V>> && ...)) MapPipe<std::size_t, V> MapPipe<K, V>::concat(const Ps&... others)
const { return make_map<map::Concater<V>>(std::vector<MapPipe<std::size_t, V>>{*this, others...}); }

}  // namespace dpipe

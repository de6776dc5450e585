#pragma once
/// \file
/// Map-style `map(fn)` (torchdata's map Mapper): get(k) is fn(source.get(k)), computed on every
/// access.

#include <memory>
#include <utility>

#include <dpipe/core/map_pipe.hpp>

namespace dpipe::map {

template <class K, class V, map_fn<V> F>
class Mapper final : public MapDataPipe<K, map_result_t<F, V>> {
  using U = map_result_t<F, V>;

 public:
  static constexpr std::string_view kName = "map";

  Mapper(const MapPipe<K, V>& source, F fn)
      : MapDataPipe<K, U>(std::string(kName)), source_(source.ptr()), fn_(std::move(fn)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Mapper>(*this); }

 protected:
  U get_impl(const K& key) override { return fn_(source_.get(key)); }
  [[nodiscard]] std::size_t size_impl() const override { return source_.size(); }
  [[nodiscard]] std::vector<K> keys_impl() const override { return source_.keys(); }

 private:
  MapInput<K, V> source_;
  F fn_;
};

/// `src | map::map(fn)`.
template <class F>
[[nodiscard]] auto map(F fn) {
  return PipeAdaptor{[fn = std::move(fn)](const auto& source) { return source.map(fn); }};
}

}  // namespace dpipe::map

template <class K, class V>
template <dpipe::map_fn<V> F>
dpipe::MapPipe<K, dpipe::map_result_t<F, V>> dpipe::MapPipe<K, V>::map(F fn) const {
  return make_map<dpipe::map::Mapper<K, V, F>>(*this, std::move(fn));
}

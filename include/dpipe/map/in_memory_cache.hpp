#pragma once
/// \file
/// Map-style `in_memory_cache()` (torchdata's map InMemoryCacheHolder): remembers each value the
/// first time it is read and returns the remembered copy afterwards. The cache is not checkpoint
/// state: a restored pipeline fills it again as it reads.

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include <dpipe/core/map_pipe.hpp>

namespace dpipe::map {

template <class K, class V>
class InMemoryCacheHolder final : public MapDataPipe<K, V> {
 public:
  static constexpr std::string_view kName = "in_memory_cache";

  explicit InMemoryCacheHolder(const MapPipe<K, V>& source)
      : MapDataPipe<K, V>(std::string(kName)), source_(source.ptr()) {}

  /// Copies the configuration; the copy's cache is empty.
  InMemoryCacheHolder(const InMemoryCacheHolder& other) : MapDataPipe<K, V>(other), source_(other.source_) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<InMemoryCacheHolder>(*this); }

  /// How many values are cached.
  [[nodiscard]] std::size_t cached() const noexcept { return cache_.size(); }

 protected:
  V get_impl(const K& key) override {
    auto found = cache_.find(key);
    if (found == cache_.end()) found = cache_.emplace(key, source_.get(key)).first;
    return found->second;
  }
  [[nodiscard]] std::size_t size_impl() const override { return source_.size(); }
  [[nodiscard]] std::vector<K> keys_impl() const override { return source_.keys(); }

 private:
  MapInput<K, V> source_;
  std::unordered_map<K, V> cache_;
};

/// `src | map::in_memory_cache()`.
[[nodiscard]] inline auto in_memory_cache() {
  return PipeAdaptor{[](const auto& source) { return source.in_memory_cache(); }};
}

}  // namespace dpipe::map

namespace dpipe {

template <class K, class V>
template <class Key>
requires hashable<Key> MapPipe<K, V> MapPipe<K, V>::in_memory_cache()
const { return make_map<map::InMemoryCacheHolder<K, V>>(*this); }

}  // namespace dpipe

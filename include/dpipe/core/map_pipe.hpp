#pragma once
/// \file
/// MapPipe<K, V>: the value handle of a map node, with torchdata's functional form as methods
/// (`dpipe::map::from(v).map(f).to_iter()`) and `|` adaptors in dpipe::map. The composition
/// methods are defined in the node headers; include <dpipe/dpipe.hpp>.

#include <cstddef>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/concepts.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/map_datapipe.hpp>

namespace dpipe {

/// A handle to a map node; copies share the node. Thread-safety: as the node's.
template <class K, class V>
class MapPipe {
 public:
  using key_type = K;
  using mapped_type = V;
  using node_type = MapDataPipe<K, V>;

  MapPipe() = default;
  explicit MapPipe(std::shared_ptr<MapDataPipe<K, V>> node) : node_(std::move(node)) {
    if (!node_) DPIPE_THROW(InvalidArgument, "MapPipe<{}, {}>: the node is null", type_name<K>(), type_name<V>());
  }

  [[nodiscard]] const std::shared_ptr<MapDataPipe<K, V>>& ptr() const noexcept { return node_; }
  [[nodiscard]] MapDataPipe<K, V>& node() const {
    if (!node_) DPIPE_THROW(UsageError, "MapPipe<{}, {}>: the handle is empty", type_name<K>(), type_name<V>());
    return *node_;
  }
  [[nodiscard]] explicit operator bool() const noexcept { return node_ != nullptr; }

  /// The value at `key`; throws KeyError when there is none.
  V get(const K& key) const { return node().get(key); }
  /// The number of keys.
  [[nodiscard]] std::size_t size() const { return node().size(); }
  /// The keys, in default to_iter() order.
  [[nodiscard]] std::vector<K> keys() const { return node().keys(); }

  /// Applies `fn` to each value on access.
  template <map_fn<V> F>
  [[nodiscard]] MapPipe<K, map_result_t<F, V>> map(F fn) const;
  /// An iter pipe yielding the values at `indices` (all keys, in keys() order, by default).
  [[nodiscard]] IterPipe<V> to_iter(std::optional<std::vector<K>> indices = std::nullopt) const;
  /// Key k holds the values at keys k*batch_size .. (k+1)*batch_size-1.
  template <class Key = K>
  requires std::same_as<Key, std::size_t>
  [[nodiscard]] MapPipe<std::size_t, std::vector<V>> batch(std::size_t batch_size, bool drop_last = false) const;
  /// The keys of this pipe, then of each of `others`, numbered on.
  template <class... Ps>
  requires(std::same_as<K, std::size_t> && (std::same_as<Ps, MapPipe<K, V>> && ...))
      [[nodiscard]] MapPipe<std::size_t, V> concat(const Ps&... others) const;
  /// Key k holds the tuple of each input's value at k.
  template <class... Us>
  requires std::same_as<K, std::size_t>
  [[nodiscard]] MapPipe<std::size_t, std::tuple<V, Us...>> zip(const MapPipe<std::size_t, Us>&... others) const;
  /// An iter pipe over the values at `keys` (all keys by default) in a random order.
  [[nodiscard]] IterPipe<V> shuffle(std::optional<std::vector<K>> keys = std::nullopt) const;
  /// Remembers each value the first time it is read.
  template <class Key = K>
  requires hashable<Key>
  [[nodiscard]] MapPipe<K, V> in_memory_cache() const;

 private:
  std::shared_ptr<MapDataPipe<K, V>> node_;
};

/// Builds a map node of type `Node` from `args` and returns a handle to it.
template <class Node, class... Args>
[[nodiscard]] MapPipe<typename Node::key_type, typename Node::mapped_type> make_map(Args&&... args) {
  return MapPipe<typename Node::key_type, typename Node::mapped_type>(
      std::make_shared<Node>(std::forward<Args>(args)...));
}

namespace map {

/// The `|` adaptor of a map node class (see iter::adaptor): `src | adaptor<Node>(args...)` builds
/// `Node(src, args...)`.
template <class Node>
inline constexpr Adaptor adaptor{
    [](const auto& source, const auto&... args) { return make_map<Node>(source, args...); }};

}  // namespace map

}  // namespace dpipe

#pragma once
/// \file
/// MapDataPipe<K, V>: the base of random-access nodes (torchdata's MapDataPipe): get by key, size,
/// keys. Map nodes keep no iteration state. MapInput<K, V> is a node's typed edge to one.

#include <cstddef>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/type_name.hpp>

namespace dpipe {

/// A node mapping keys K to values V. Thread-safety: one thread uses a node at a time.
template <class K, class V>
class MapDataPipe : public DataPipe {
 public:
  using key_type = K;
  using mapped_type = V;

  [[nodiscard]] PipeKind kind() const noexcept final { return PipeKind::kMap; }
  [[nodiscard]] std::string element_type() const final { return type_name<K>() + " -> " + type_name<V>(); }
  [[nodiscard]] std::type_index element_type_index() const noexcept final { return typeid(MapDataPipe); }

  /// The value at `key`; throws KeyError when there is none.
  V get(const K& key) { return get_impl(key); }
  /// The number of keys.
  [[nodiscard]] std::size_t size() const { return size_impl(); }
  /// The keys, in the order to_iter() visits them by default.
  [[nodiscard]] std::vector<K> keys() const { return keys_impl(); }
  /// A hint that get(key) follows soon: a node may start fetching what it will read (memory, a
  /// file's pages), so that a reader in a random order overlaps the waits. Never throws.
  void prefetch(const K& key) const noexcept { prefetch_impl(key); }

  /// Map nodes have no iteration state.
  [[nodiscard]] bool stateless() const noexcept override { return true; }

 protected:
  explicit MapDataPipe(std::string name) : DataPipe(std::move(name)) {}
  MapDataPipe(const MapDataPipe&) = default;

  virtual V get_impl(const K& key) = 0;
  [[nodiscard]] virtual std::size_t size_impl() const = 0;
  /// The default ignores the hint.
  virtual void prefetch_impl(const K& /*key*/) const noexcept {}
  /// The default, for integral keys, is 0 .. size()-1; other key types must override it.
  [[nodiscard]] virtual std::vector<K> keys_impl() const {
    if constexpr (std::is_integral_v<K>) {
      std::vector<K> result(size());
      std::iota(result.begin(), result.end(), K{0});
      return result;
    } else {
      DPIPE_THROW(NotSupportedError, "{} has keys of type {}: it must override keys_impl()", label(), type_name<K>());
    }
  }
};

/// A typed edge to a MapDataPipe<K, V>.
template <class K, class V>
class MapInput final : public InputSlot {
 public:
  MapInput() = default;
  explicit MapInput(std::shared_ptr<MapDataPipe<K, V>> node) : node_(std::move(node)) {
    if (!node_) DPIPE_THROW(InvalidArgument, "an input map pipe of {} -> {} is empty", type_name<K>(), type_name<V>());
  }

  V get(const K& key) const { return node_->get(key); }
  [[nodiscard]] std::size_t size() const { return node_->size(); }
  [[nodiscard]] std::vector<K> keys() const { return node_->keys(); }
  void prefetch(const K& key) const noexcept { node_->prefetch(key); }
  [[nodiscard]] MapDataPipe<K, V>& node() const noexcept { return *node_; }

  [[nodiscard]] DataPipePtr target() const override { return node_; }
  [[nodiscard]] bool try_assign(const DataPipePtr& replacement) override {
    auto typed = std::dynamic_pointer_cast<MapDataPipe<K, V>>(replacement);
    if (!typed) return false;
    node_ = std::move(typed);
    return true;
  }
  [[nodiscard]] std::string expected_type() const override {
    return "a map pipe of " + type_name<K>() + " -> " + type_name<V>();
  }
  /// Map pipes have no iterations to start.
  void reset() override {}
  void rebind() noexcept override {}

 private:
  std::shared_ptr<MapDataPipe<K, V>> node_;
};

namespace detail {

/// The keys a map-reading iter node visits: the ones given, or all of the source's (read once,
/// on first use).
template <class K>
class KeySelection {
 public:
  explicit KeySelection(std::optional<std::vector<K>> keys) : keys_(std::move(keys)) {}

  template <class V>
  const std::vector<K>& get(const MapInput<K, V>& source) const {
    if (!keys_) keys_ = source.keys();
    return *keys_;
  }

 private:
  mutable std::optional<std::vector<K>> keys_;
};

}  // namespace detail
}  // namespace dpipe

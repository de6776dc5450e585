#pragma once
/// \file
/// Map-style `shuffle(keys)` (torchdata's map Shuffler): an iter pipe yielding the values at `keys`
/// (all keys by default) in a random order: CPython's random.sample of the keys, yielded from the
/// back, as torchdata does. Seeded per iteration like `shuffle`; set_shuffle(false) yields the keys
/// in order. Unlike torchdata its length is the number of keys. Checkpoint state: the keys still
/// to visit.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/map_pipe.hpp>
#include <dpipe/random/python_random.hpp>
#include <dpipe/random/seed_generator.hpp>

namespace dpipe::map {

template <class K, class V>
class Shuffler final : public IterDataPipe<V>, public ShufflingDataPipe {
 public:
  static constexpr std::string_view kName = "shuffle";

  Shuffler(const MapPipe<K, V>& source, std::optional<std::vector<K>> keys)
      : IterDataPipe<V>(std::string(kName)), source_(source.ptr()), keys_(std::move(keys)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Shuffler>(*this); }

  void set_seed(std::uint64_t seed) override { pending_seed_ = seed; }
  void set_shuffle(bool enabled) override { enabled_ = enabled; }
  /// The seed the next iteration will use, if one was set.
  [[nodiscard]] std::optional<std::uint64_t> pending_seed() const noexcept { return pending_seed_; }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    if constexpr (serializable<K>) {
      writer.write("enabled", enabled_);
      writer.write("pending_seed", pending_seed_);
      writer.write("order", order_);
      return true;
    } else {
      DPIPE_THROW(StateError, "{}: keys of type {} have no dpipe::Serializer", this->label(), type_name<K>());
    }
  }
  void load_state(const StateReader& reader) override {
    if constexpr (serializable<K>) {
      enabled_ = reader.read<bool>("enabled");
      pending_seed_ = reader.read<std::optional<std::uint64_t>>("pending_seed");
      order_ = reader.read<std::vector<K>>("order");
    }
  }

 protected:
  void reset_impl() override {
    if (!enabled_) {
      order_.assign(keys().rbegin(), keys().rend());
      return;
    }
    PythonRandom rng(pending_seed_ ? *pending_seed_ : entropy_seed());
    pending_seed_.reset();
    order_ = rng.sample(keys(), keys().size());
  }

  std::optional<V> next_impl() override {
    if (order_.empty()) return std::nullopt;
    K key = std::move(order_.back());
    order_.pop_back();
    return source_.get(key);
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return keys().size(); }

 private:
  const std::vector<K>& keys() const { return keys_.get(source_); }

  MapInput<K, V> source_;
  detail::KeySelection<K> keys_;
  bool enabled_ = true;
  std::optional<std::uint64_t> pending_seed_;
  std::vector<K> order_;  // the keys still to visit, last first
};

/// `src | map::shuffle()`.
[[nodiscard]] inline auto shuffle() {
  return PipeAdaptor{[](const auto& source) { return source.shuffle(); }};
}

}  // namespace dpipe::map

namespace dpipe {

template <class K, class V>
IterPipe<V> MapPipe<K, V>::shuffle(std::optional<std::vector<K>> keys) const {
  return make_iter<map::Shuffler<K, V>>(*this, std::move(keys));
}

}  // namespace dpipe

#pragma once
/// \file
/// `to_iter(indices)` (torchdata's MapToIterConverter): an iter pipe yielding the values of a map
/// pipe at the given keys (all keys by default). Unlike torchdata, an empty key list yields
/// nothing. Checkpoint state: the position in the key list.

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/map_pipe.hpp>

namespace dpipe::map {

template <class K, class V>
class MapToIterConverter final : public IterDataPipe<V> {
 public:
  static constexpr std::string_view kName = "to_iter";

  MapToIterConverter(const MapPipe<K, V>& source, std::optional<std::vector<K>> keys)
      : IterDataPipe<V>(std::string(kName)), source_(source.ptr()), keys_(std::move(keys)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<MapToIterConverter>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("position", std::uint64_t{position_});
    return true;
  }
  void load_state(const StateReader& reader) override {
    position_ = reader.read<std::uint64_t>("position");
    if (position_ > keys().size())
      DPIPE_THROW(StateError, "{}: saved position {} is beyond {} keys", this->label(), position_, keys().size());
  }

 protected:
  void reset_impl() override { position_ = 0; }

  std::optional<V> next_impl() override {
    const auto& all = keys();
    if (position_ >= all.size()) return std::nullopt;
    return source_.get(all[position_++]);
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return keys().size(); }

 private:
  const std::vector<K>& keys() const { return keys_.get(source_); }

  MapInput<K, V> source_;
  detail::KeySelection<K> keys_;
  std::size_t position_ = 0;
};

/// `src | map::to_iter(indices)`.
template <class K>
[[nodiscard]] auto to_iter(std::optional<std::vector<K>> indices) {
  return PipeAdaptor{[indices = std::move(indices)](const auto& source) { return source.to_iter(indices); }};
}

/// `src | map::to_iter()`.
[[nodiscard]] inline auto to_iter() {
  return PipeAdaptor{[](const auto& source) { return source.to_iter(); }};
}

}  // namespace dpipe::map

template <class K, class V>
dpipe::IterPipe<V> dpipe::MapPipe<K, V>::to_iter(std::optional<std::vector<K>> indices) const {
  return make_iter<dpipe::map::MapToIterConverter<K, V>>(*this, std::move(indices));
}

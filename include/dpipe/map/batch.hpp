#pragma once
/// \file
/// Map-style `batch(batch_size, drop_last)` (torchdata's map Batcher): key k holds the values at
/// keys k*batch_size .. (k+1)*batch_size-1 of an index-keyed map pipe; the last batch may be short
/// unless `drop_last`.

#include <memory>
#include <string>
#include <vector>

#include <dpipe/core/detail/checks.hpp>
#include <dpipe/core/map_pipe.hpp>

namespace dpipe::map {

template <class V>
class Batcher final : public MapDataPipe<std::size_t, std::vector<V>> {
 public:
  static constexpr std::string_view kName = "batch";

  Batcher(const MapPipe<std::size_t, V>& source, std::size_t batch_size, bool drop_last)
      : MapDataPipe<std::size_t, std::vector<V>>(std::string(kName)),
        source_(source.ptr()),
        shape_(batch_size, drop_last) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Batcher>(*this); }
  [[nodiscard]] NodeSettings settings() const override { return shape_.settings(); }

 protected:
  std::vector<V> get_impl(const std::size_t& key) override {
    if (key >= size_impl()) DPIPE_THROW(KeyError, "Index {} is out of bound.", key);
    const std::size_t first = key * shape_.size;
    const std::size_t last = std::min(first + shape_.size, source_.size());
    std::vector<V> batch;
    batch.reserve(last - first);
    for (std::size_t i = first; i < last; ++i) batch.push_back(source_.get(i));
    return batch;
  }

  [[nodiscard]] std::size_t size_impl() const override { return shape_.count(source_.size()); }

 private:
  MapInput<std::size_t, V> source_;
  detail::BatchShape shape_;
};

/// `src | map::batch(batch_size, drop_last)`.
[[nodiscard]] inline auto batch(std::size_t batch_size, bool drop_last = false) {
  return PipeAdaptor{[=](const auto& source) { return source.batch(batch_size, drop_last); }};
}

}  // namespace dpipe::map

namespace dpipe {

template <class K, class V>
template <class Key>
requires std::same_as<Key, std::size_t> MapPipe<std::size_t, std::vector<V>> MapPipe<K, V>::batch(
    std::size_t batch_size, bool drop_last)
const { return make_map<map::Batcher<V>>(*this, batch_size, drop_last); }

}  // namespace dpipe

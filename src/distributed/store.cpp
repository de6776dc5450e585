// Store's default exchange, and PrefixStore.

#include <string>
#include <utility>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/distributed/store.hpp>

namespace dpipe {

std::vector<std::vector<std::byte>> Store::exchange(const std::string& post, std::span<const std::byte> value,
                                                    const std::string& collect, std::size_t rank,
                                                    std::size_t world_size) {
  if (rank >= world_size) {
    DPIPE_THROW(InvalidArgument, "Store::exchange('{}', '{}'): rank {} is outside a world of {}", post, collect, rank,
                world_size);
  }
  if (!post.empty()) set(fmt::format("{}/{}", post, rank), value);
  if (collect.empty()) return {};
  std::vector<std::string> keys;
  keys.reserve(world_size);
  for (std::size_t r = 0; r < world_size; ++r) keys.push_back(fmt::format("{}/{}", collect, r));
  wait(keys);
  std::vector<std::vector<std::byte>> values;
  values.reserve(world_size);
  for (const auto& key : keys) values.push_back(get(key));
  return values;
}

PrefixStore::PrefixStore(std::shared_ptr<Store> store, std::string prefix)
    : store_(std::move(store)), prefix_(std::move(prefix)) {
  if (!store_) DPIPE_THROW(InvalidArgument, "PrefixStore: the store is null");
}

void PrefixStore::set(const std::string& key, std::span<const std::byte> value) { store_->set(full(key), value); }

std::vector<std::byte> PrefixStore::get(const std::string& key) { return store_->get(full(key)); }

std::int64_t PrefixStore::add(const std::string& key, std::int64_t delta) { return store_->add(full(key), delta); }

std::vector<std::byte> PrefixStore::compare_set(const std::string& key, std::span<const std::byte> expected,
                                                std::span<const std::byte> desired) {
  return store_->compare_set(full(key), expected, desired);
}

void PrefixStore::wait(const std::vector<std::string>& keys) {
  std::vector<std::string> full_keys;
  full_keys.reserve(keys.size());
  for (const auto& key : keys) full_keys.push_back(full(key));
  store_->wait(full_keys);
}

bool PrefixStore::remove(const std::string& key) { return store_->remove(full(key)); }

std::vector<std::vector<std::byte>> PrefixStore::exchange(const std::string& post, std::span<const std::byte> value,
                                                          const std::string& collect, std::size_t rank,
                                                          std::size_t world_size) {
  return store_->exchange(post.empty() ? post : full(post), value, collect.empty() ? collect : full(collect), rank,
                          world_size);
}

}  // namespace dpipe

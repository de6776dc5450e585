// Store's default all_gather, and PrefixStore.

#include <string>
#include <utility>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/distributed/store.hpp>

namespace dpipe {

std::vector<std::vector<std::byte>> Store::all_gather(const std::string& round, std::size_t rank,
                                                      std::size_t world_size, std::span<const std::byte> value,
                                                      bool wait) {
  if (rank >= world_size) {
    DPIPE_THROW(InvalidArgument, "Store::all_gather('{}'): rank {} is outside a world of {}", round, rank, world_size);
  }
  const auto key = [&](std::size_t r) { return fmt::format("{}/{}", round, r); };
  set(key(rank), value);
  if (!wait) return {};
  std::vector<std::string> keys;
  keys.reserve(world_size);
  for (std::size_t r = 0; r < world_size; ++r) keys.push_back(key(r));
  this->wait(keys);
  std::vector<std::vector<std::byte>> values;
  values.reserve(world_size);
  for (const auto& each : keys) values.push_back(get(each));
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

std::vector<std::vector<std::byte>> PrefixStore::all_gather(const std::string& round, std::size_t rank,
                                                            std::size_t world_size, std::span<const std::byte> value,
                                                            bool wait) {
  return store_->all_gather(full(round), rank, world_size, value, wait);
}

}  // namespace dpipe

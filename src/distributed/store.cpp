// PrefixStore.

#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/distributed/store.hpp>

namespace dpipe {

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

}  // namespace dpipe

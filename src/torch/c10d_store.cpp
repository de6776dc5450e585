#include <exception>
#include <utility>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/torch/c10d_store.hpp>

namespace dpipe {

namespace {

std::vector<std::uint8_t> to_c10d(std::span<const std::byte> bytes) {
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  return {data, data + bytes.size()};
}

std::vector<std::byte> from_c10d(const std::vector<std::uint8_t>& bytes) {
  const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
  return {data, data + bytes.size()};
}

/// Runs `call` on the c10d store; its exceptions (c10::Error, std::runtime_error) become
/// RendezvousErrors naming `what`.
template <class Call>
auto guarded(const std::string& what, Call call) {
  try {
    return call();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    DPIPE_THROW(RendezvousError, "c10d store: {}: {}", what, error.what());
  }
}

}  // namespace

C10dStore::C10dStore(c10::intrusive_ptr<::c10d::Store> store) : store_(std::move(store)) {
  if (!store_) DPIPE_THROW(InvalidArgument, "C10dStore: the c10d store is null");
}

void C10dStore::set(const std::string& key, std::span<const std::byte> value) {
  guarded(fmt::format("set('{}')", key), [&] { store_->set(key, to_c10d(value)); });
}

std::vector<std::byte> C10dStore::get(const std::string& key) {
  const std::string what = fmt::format("get('{}')", key);
  wait_naming(what, {key}, {fmt::format("'{}'", key)});
  return guarded(what, [&] { return from_c10d(store_->get(key)); });
}

std::int64_t C10dStore::add(const std::string& key, std::int64_t delta) {
  return guarded(fmt::format("add('{}')", key), [&] { return store_->add(key, delta); });
}

std::vector<std::byte> C10dStore::compare_set(const std::string& key, std::span<const std::byte> expected,
                                              std::span<const std::byte> desired) {
  return guarded(fmt::format("compare_set('{}')", key), [&] {
    auto result = from_c10d(store_->compareSet(key, to_c10d(expected), to_c10d(desired)));
    // c10d answers `expected` for a key that holds nothing; dpipe::Store answers what it holds.
    if (!expected.empty() && !store_->check({key})) result.clear();
    return result;
  });
}

void C10dStore::wait(const std::vector<std::string>& keys) {
  std::vector<std::string> who;
  who.reserve(keys.size());
  for (const auto& key : keys) who.push_back(fmt::format("'{}'", key));
  wait_naming("wait", keys, who);
}

bool C10dStore::remove(const std::string& key) {
  return guarded(fmt::format("remove('{}')", key), [&] { return store_->deleteKey(key); });
}

std::vector<std::vector<std::byte>> C10dStore::exchange(const std::string& post, std::span<const std::byte> value,
                                                        const std::string& collect, std::size_t rank,
                                                        std::size_t world_size) {
  if (rank >= world_size) {
    DPIPE_THROW(InvalidArgument, "C10dStore::exchange('{}', '{}'): rank {} is outside a world of {}", post, collect,
                rank, world_size);
  }
  if (!post.empty()) set(fmt::format("{}/{}", post, rank), value);
  if (collect.empty()) return {};
  std::vector<std::string> keys;
  std::vector<std::string> who;
  for (std::size_t r = 0; r < world_size; ++r) {
    keys.push_back(fmt::format("{}/{}", collect, r));
    who.push_back(fmt::format("rank {}", r));
  }
  const std::string what = fmt::format("exchange(collect '{}', rank {} of {})", collect, rank, world_size);
  wait_naming(what, keys, who);
  std::vector<std::vector<std::byte>> values;
  values.reserve(world_size);
  guarded(what, [&] {
    for (const auto& key : keys) values.push_back(from_c10d(store_->get(key)));
    // The last rank to collect the round deletes it: a long job leaves no key per round behind.
    const std::string collected = collect + "/collected";
    if (store_->add(collected, 1) == static_cast<std::int64_t>(world_size)) {
      for (const auto& key : keys) store_->deleteKey(key);
      store_->deleteKey(collected);
    }
  });
  return values;
}

std::chrono::milliseconds C10dStore::timeout() const { return store_->getTimeout(); }

void C10dStore::set_timeout(std::chrono::milliseconds timeout) { store_->setTimeout(timeout); }

void C10dStore::wait_naming(const std::string& what, const std::vector<std::string>& keys,
                            const std::vector<std::string>& who) {
  try {
    store_->wait(keys);
    return;
  } catch (const std::exception& error) {
    std::vector<std::string> missing;
    try {
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (!store_->check({keys[i]})) missing.push_back(who[i]);
      }
    } catch (const std::exception&) {
      missing.clear();  // the store itself is gone: report its failure
    }
    if (missing.empty()) DPIPE_THROW(RendezvousError, "c10d store: {}: {}", what, error.what());
    DPIPE_THROW(TimeoutError, "c10d store: {}: {} did not arrive within {} ms", what, fmt::join(missing, ", "),
                store_->getTimeout().count());
  }
}

}  // namespace dpipe

#pragma once
/// \file
/// The rendezvous store of a distributed job (torch.distributed's Store): a map from string keys to
/// byte values that every rank of the job shares, used to agree on seeds and progress. A trainer
/// that already has a store passes its own by implementing Store; dpipe's own is TcpStore
/// (<dpipe/distributed/tcp_store.hpp>). PrefixStore keeps each loader's keys apart.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dpipe {

/// Every call waits at most timeout(): past it, TimeoutError; a store that cannot be reached is a
/// RendezvousError. Thread-safety: an implementation says; TcpStore and PrefixStore are used by
/// one thread at a time.
class Store {
 public:
  virtual ~Store() = default;

  /// Sets `key` to `value`, replacing what it held.
  virtual void set(const std::string& key, std::span<const std::byte> value) = 0;
  /// The value of `key`, waiting until some rank sets it.
  virtual std::vector<std::byte> get(const std::string& key) = 0;
  /// Adds `delta` to the integer `key` holds (0 when it holds nothing) and returns the sum.
  /// Throws InvalidArgument when `key` holds something that add() did not write.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  /// Sets `key` to `desired` if it holds `expected` (or holds nothing and `expected` is empty);
  /// returns what `key` holds afterwards.
  virtual std::vector<std::byte> compare_set(const std::string& key, std::span<const std::byte> expected,
                                             std::span<const std::byte> desired) = 0;
  /// Waits until every key in `keys` holds a value.
  virtual void wait(const std::vector<std::string>& keys) = 0;
  /// Deletes `key`; returns whether it held a value.
  virtual bool remove(const std::string& key) = 0;

  /// A collective step of `world_size` ranks, pipelined. Leaves `value` as this rank's value of
  /// round `post` (unless `post` is empty); then, unless `collect` is empty, waits until every
  /// rank has left its value in round `collect` and returns them in rank order. A rank collects a
  /// round it posted before (in this call or an earlier one), once; so a rank can post round
  /// k + 1 and collect round k in one request, and wait only for ranks a whole round behind.
  /// Throws TimeoutError naming what did not arrive within timeout(), and RendezvousError when a
  /// rank of the round is known to be gone.
  ///
  /// The default implementation builds it from set(), wait() and get() under the keys
  /// "<round>/<rank>", which it leaves in the store (about one key per rank per fullsync round:
  /// a store of your own that serves long jobs should override it). TcpStore does it in one
  /// request per rank, forgets a round once every rank collected it, and knows when a rank left
  /// (its connection closed).
  virtual std::vector<std::vector<std::byte>> exchange(const std::string& post, std::span<const std::byte> value,
                                                       const std::string& collect, std::size_t rank,
                                                       std::size_t world_size);
  /// Every rank's value of `round`: exchange(round, value, round, rank, world_size).
  std::vector<std::vector<std::byte>> all_gather(const std::string& round, std::size_t rank, std::size_t world_size,
                                                 std::span<const std::byte> value) {
    return exchange(round, value, round, rank, world_size);
  }

  /// The longest any call waits.
  [[nodiscard]] virtual std::chrono::milliseconds timeout() const = 0;
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;

  /// set() of a text.
  void set(const std::string& key, std::string_view text) { set(key, std::as_bytes(std::span(text))); }
  /// get() of a text.
  [[nodiscard]] std::string get_text(const std::string& key) {
    const auto bytes = get(key);
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }

 protected:
  Store() = default;
  Store(const Store&) = default;
  Store& operator=(const Store&) = default;
};

/// A view of another store in which every key is prefixed with `prefix` (say "loader7/"), so that
/// two loaders, or a loader and the trainer, never collide. Thread-safety: that of the store.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> store, std::string prefix);

  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::vector<std::byte> compare_set(const std::string& key, std::span<const std::byte> expected,
                                     std::span<const std::byte> desired) override;
  void wait(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;
  /// The store's exchange of the prefixed rounds.
  std::vector<std::vector<std::byte>> exchange(const std::string& post, std::span<const std::byte> value,
                                               const std::string& collect, std::size_t rank,
                                               std::size_t world_size) override;
  [[nodiscard]] std::chrono::milliseconds timeout() const override { return store_->timeout(); }
  void set_timeout(std::chrono::milliseconds timeout) override { store_->set_timeout(timeout); }

  using Store::set;

 private:
  [[nodiscard]] std::string full(const std::string& key) const { return prefix_ + key; }

  std::shared_ptr<Store> store_;
  std::string prefix_;
};

}  // namespace dpipe

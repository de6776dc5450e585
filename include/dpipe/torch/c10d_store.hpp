#pragma once
/// \file
/// C10dStore: torch.distributed's rendezvous store (a c10d::Store, such as the c10d::TCPStore a
/// trainer under torchrun already has on MASTER_PORT) as a dpipe::Store, so that
/// DistributedReadingService rides on the trainer's store and opens no port of its own:
///
///     auto tcp = c10::make_intrusive<c10d::TCPStore>(master_addr, options);
///     dpipe::DistributedOptions distributed;
///     distributed.store = std::make_shared<dpipe::C10dStore>(tcp);
///
/// Part of the optional target dpipe::torch, built where CMake finds libtorch (find_package(Torch)).
///
/// Errors: a call that outlasts timeout() is a TimeoutError; any other failure of the c10d store
/// (its server gone, a refused connection) is a RendezvousError with c10d's words. An exchange
/// names the ranks whose values did not arrive, so a rank that died is reported by its number;
/// it deletes each round's keys once every rank collected them. compare_set of a key that holds
/// nothing with a non-empty `expected` returns nothing, as dpipe::Store says (c10d returns
/// `expected`); that answer comes from a second request, so a rank that sets the key in between
/// may be missed (dpipe's services do not call compare_set). add() of a key holding a non-integer
/// is c10d's error, a RendezvousError. Thread-safety: that of the c10d store (c10d::TCPStore's
/// calls are thread-safe).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include <dpipe/distributed/store.hpp>

namespace dpipe {

class C10dStore final : public Store {
 public:
  /// Wraps `store` (not null; InvalidArgument otherwise).
  explicit C10dStore(c10::intrusive_ptr<::c10d::Store> store);

  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::vector<std::byte> compare_set(const std::string& key, std::span<const std::byte> expected,
                                     std::span<const std::byte> desired) override;
  void wait(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;
  std::vector<std::vector<std::byte>> exchange(const std::string& post, std::span<const std::byte> value,
                                               const std::string& collect, std::size_t rank,
                                               std::size_t world_size) override;
  [[nodiscard]] std::chrono::milliseconds timeout() const override;
  void set_timeout(std::chrono::milliseconds timeout) override;

  using Store::set;

  /// The c10d store.
  [[nodiscard]] const c10::intrusive_ptr<::c10d::Store>& c10d_store() const noexcept { return store_; }

 private:
  /// Waits for `keys`; on failure throws TimeoutError naming those still missing (`who` describes
  /// them: "rank 1"), or RendezvousError when the store itself failed.
  void wait_naming(const std::string& what, const std::vector<std::string>& keys, const std::vector<std::string>& who);

  c10::intrusive_ptr<::c10d::Store> store_;
};

}  // namespace dpipe

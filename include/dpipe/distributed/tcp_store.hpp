#pragma once
/// \file
/// TcpStore: dpipe's rendezvous store over TCP. Rank 0 serves it from a background thread (and is
/// a client of it like every rank); the other ranks connect, retrying with backoff until the
/// timeout while rank 0 is not up yet.
///
/// Wire protocol (version 3): every message is a frame, a 4-byte length then that many bytes, at
/// most `max_message_bytes`. A connection starts with a handshake carrying the protocol version,
/// the job token and, for a rank of a loader, who it is (its rank, the world size and the
/// fingerprint of what it runs); the server refuses, logs and closes a connection with another
/// version or token, a rank that disagrees with its loader's rank 0 on the world size or the
/// fingerprint or whose rank is connected already (another job on the port), a frame over the
/// limit, or a message it cannot decode, and goes on serving the others. TcpStores of one process
/// that serve the same host and port share one server.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <dpipe/distributed/store.hpp>

namespace dpipe {

struct TcpStoreOptions {
  /// The host that serves the store (the server listens on it; clients connect to it).
  std::string host = "127.0.0.1";
  /// Its port; 0 with `serve`: any free port (port() tells which).
  std::uint16_t port = 0;
  /// Serve the store from this process (rank 0), in a background thread.
  bool serve = false;
  /// The job's token: the server refuses connections that present another one.
  std::string token;
  /// The longest a call waits, connecting included.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  /// The largest frame either side accepts.
  std::size_t max_message_bytes = std::size_t{64} << 20;
  /// The rank this client speaks for, and what it is a rank of (a loader's key prefix; empty:
  /// every round of the store): the rounds under that prefix that still wait for this rank then
  /// fail at once, naming it, when its connection closes (its process died) or it calls leave(),
  /// instead of running into their timeout. Unset: the client is nobody in particular. A rank
  /// other than 0 connects once rank 0 of the same member greeted the server (or, when it says no
  /// world_size, while no rank 0 did): until then it waits, as for a server that is not up,
  /// within the timeout. So a rank 0
  /// of your own with other ranks that set `rank` sets `rank = 0` and the same member too.
  std::optional<std::size_t> rank;
  std::string member;
  /// With `rank`: the world size and the fingerprint of what the member runs (say, a hash of its
  /// pipeline). The server refuses at once a rank whose world size or fingerprint differ from
  /// those of the member's rank 0, naming both; a rank that says a world size (nonzero) connects
  /// only once its rank 0 did.
  std::size_t world_size = 0;
  std::string fingerprint;
  /// With `rank`: called once, from a thread of the store's, with "rank 1 is gone: ..." when
  /// another rank of the member is gone without leaving (its connection closed, or the store
  /// refused it) or the process serving the store died, so that a rank that waits in no round
  /// (it hands out what was agreed before) hears of it at once. The client watches over a
  /// second connection. Keep it short: it must not call the store.
  std::function<void(const std::string&)> on_departure;
  /// While a call waits (for the server to come up, or for the other ranks of a round), a warning
  /// naming what is missing is logged every `stall_warning`; zero: never.
  std::chrono::milliseconds stall_warning{0};
};

/// Thread-safety: one thread at a time calls a TcpStore; the server thread is its own.
class TcpStore final : public Store {
 public:
  /// Serves (when options.serve) and connects. Throws RendezvousError when the port cannot be
  /// bound, or when the server cannot be reached or refuses the connection within the timeout;
  /// InvalidArgument for a host that does not resolve.
  explicit TcpStore(TcpStoreOptions options);
  /// Closes the connection. The last TcpStore of the process serving a port stops the server: it
  /// lingers while a rank still connected has yet to collect a round another rank collected (up
  /// to the rounds' timeout), then tells every client it closes and closes their connections.
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::vector<std::byte> compare_set(const std::string& key, std::span<const std::byte> expected,
                                     std::span<const std::byte> desired) override;
  void wait(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;
  /// One request per rank; the server forgets a round once every rank collected it (a round no
  /// rank collects stays until the server stops). The posts this client made without collecting
  /// since its last collection are posted again to the next server when its server closes on
  /// purpose. The server fails a round for everyone when its timeout passes (TimeoutError naming
  /// the ranks that did not arrive; the call itself waits a second longer for that answer) or
  /// when a missing rank is gone (RendezvousError: "rank 1 is gone: its connection to the store
  /// closed").
  std::vector<std::vector<std::byte>> exchange(const std::string& post, std::span<const std::byte> value,
                                               const std::string& collect, std::size_t rank,
                                               std::size_t world_size) override;
  [[nodiscard]] std::chrono::milliseconds timeout() const override;
  void set_timeout(std::chrono::milliseconds timeout) override;

  using Store::set;

  /// Tells the server that this client's rank leaves on purpose (its loader shuts down), so that
  /// rounds still waiting for it fail now ("rank 1 is gone: it shut its loader down"), and closes
  /// the connection. Never throws: a store that is gone already is no news at shutdown.
  void leave() noexcept;

  /// The port of the store (the one the server bound, when it was 0).
  [[nodiscard]] std::uint16_t port() const noexcept;

  /// The protocol version this build speaks.
  static constexpr std::uint32_t kProtocolVersion = 3;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpipe

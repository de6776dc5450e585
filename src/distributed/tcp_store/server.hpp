#pragma once
// StoreServer: the map behind a TcpStore, served over TCP by one background thread (an Asio event
// loop). Everything but construction, shared() and destruction runs on that thread.

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distributed/tcp_store/protocol.hpp"

namespace dpipe::detail::store {

class StoreServer {
 public:
  /// Binds `host`:`port` (0: any free port) and starts serving. Throws RendezvousError when it
  /// cannot bind.
  StoreServer(const std::string& host, std::uint16_t port, std::string token, std::size_t max_message_bytes);
  /// Sends the replies already decided (a completed round's), then closes every connection and
  /// joins the thread.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The server of this process on `host`:`port`, started if none runs, so that the TcpStores of
  /// one process (a trainer's loaders) share one. Port 0 always starts a new one. Throws
  /// RendezvousError when the port is served here for another job token. Thread-safe.
  static std::shared_ptr<StoreServer> shared(const std::string& host, std::uint16_t port, const std::string& token,
                                             std::size_t max_message_bytes);

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

 private:
  class Connection;
  friend class Connection;

  /// A get() or wait() for keys that do not all exist yet.
  struct Waiter {
    std::weak_ptr<Connection> connection;
    std::vector<std::string> keys;
    bool wants_value = false;  // get(): reply with the value of keys[0]
  };

  /// An all_gather round that not every rank reached yet.
  struct Round {
    std::vector<std::optional<std::vector<std::byte>>> values;  // by rank
    std::vector<std::weak_ptr<Connection>> waiting;             // who waits for the values
    std::size_t arrived = 0;
    std::unique_ptr<asio::steady_timer> deadline;
  };

  void accept();
  /// Serves one request of `connection`; replies now or when its keys exist.
  void serve(const std::shared_ptr<Connection>& connection, Request request);
  void gather(const std::shared_ptr<Connection>& connection, Request request);
  /// Replies to the waiters whose keys all exist now.
  void settle_waiters();
  [[nodiscard]] bool has_all(const std::vector<std::string>& keys) const;
  /// `member` left the job (`why`): its rounds still missing it fail.
  void depart(const Member& member, const std::string& why);
  /// Why `round` cannot complete, if one of its missing ranks is gone.
  [[nodiscard]] std::optional<std::string> departed_from(const std::string& round, const Round& state) const;
  /// Fails `round` for everyone waiting in it and for the ranks still to come.
  void fail_round(const std::string& round, Failure failure, const std::string& error);
  /// While stopping: lets the event loop end once every connection is closed.
  void stop_when_closed();

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer cutoff_;  // while stopping: closes the connections a peer does not let finish
  std::uint16_t port_ = 0;
  std::string token_;
  std::size_t max_message_bytes_;
  std::map<std::string, std::vector<std::byte>> values_;
  std::vector<Waiter> waiters_;
  std::map<std::string, Round> rounds_;
  std::map<Member, std::string> departed_;
  std::map<std::string, Reply> failed_rounds_;  // the last ones, for the ranks that arrive after the failure
  std::deque<std::string> failed_order_;
  std::vector<std::weak_ptr<Connection>> connections_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dpipe::detail::store

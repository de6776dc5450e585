#pragma once
// StoreServer: the map behind a TcpStore, served over TCP by one background thread (an Asio event
// loop). Everything but construction and destruction runs on that thread.

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
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
  /// Closes every connection and joins the thread.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

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

  void accept();
  /// Serves one request of `connection`; replies now or when its keys exist.
  void serve(const std::shared_ptr<Connection>& connection, Request request);
  /// Replies to the waiters whose keys all exist now.
  void settle_waiters();
  [[nodiscard]] bool has_all(const std::vector<std::string>& keys) const;

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::string token_;
  std::size_t max_message_bytes_;
  std::map<std::string, std::vector<std::byte>> values_;
  std::vector<Waiter> waiters_;
  std::vector<std::weak_ptr<Connection>> connections_;
  std::thread thread_;
};

}  // namespace dpipe::detail::store

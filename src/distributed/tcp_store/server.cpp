// StoreServer.

#include "distributed/tcp_store/server.hpp"

#include <array>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <charconv>
#include <cstring>
#include <deque>
#include <exception>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/distributed/tcp_store.hpp>

namespace dpipe::detail::store {
namespace {

std::vector<std::byte> text_bytes(std::string_view text) {
  const auto bytes = std::as_bytes(std::span(text));
  return {bytes.begin(), bytes.end()};
}

/// The integer add() keeps as decimal text, or nullopt for any other value.
std::optional<std::int64_t> as_integer(const std::vector<std::byte>& value) {
  std::int64_t number = 0;
  const auto* first = reinterpret_cast<const char*>(value.data());
  const auto [end, error] = std::from_chars(first, first + value.size(), number);
  if (value.empty() || error != std::errc() || end != first + value.size()) return std::nullopt;
  return number;
}

}  // namespace

/// One client's connection: reads frames, hands requests to the server, writes replies in order.
class StoreServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(StoreServer& server, asio::ip::tcp::socket socket) : server_(server), socket_(std::move(socket)) {
    asio::error_code ignored;
    const auto remote = socket_.remote_endpoint(ignored);
    peer_ =
        ignored ? std::string("an unknown peer") : remote.address().to_string() + ":" + std::to_string(remote.port());
  }

  void start() { read_frame(); }

  /// Sends `reply` after the replies before it.
  void send(const Reply& reply) { write(frame(encode(reply))); }

  /// Closes the connection, cancelling what it waits for.
  void close() {
    asio::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  void read_frame() {
    asio::async_read(socket_, asio::buffer(header_),
                     [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                       if (!error) self->read_body();
                     });
  }

  void read_body() {
    std::uint32_t size = 0;
    std::memcpy(&size, header_.data(), sizeof(size));
    const std::size_t limit = greeted_ ? server_.max_message_bytes_ : kMaxHelloBytes;
    if (size > limit) {
      refuse(fmt::format("a message of {} bytes exceeds the limit of {}", size, limit));
      return;
    }
    body_.resize(size);
    asio::async_read(socket_, asio::buffer(body_),
                     [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                       if (!error) self->on_message();
                     });
  }

  void on_message() {
    if (!greeted_) {
      greet();
      return;
    }
    Request request;
    try {
      request = decode_request(body_);
    } catch (const std::exception& error) {
      refuse(fmt::format("a malformed request ({})", error.what()));
      return;
    }
    server_.serve(shared_from_this(), std::move(request));
    read_frame();
  }

  void greet() {
    Hello hello;
    try {
      hello = decode_hello(body_);
    } catch (const std::exception& error) {
      refuse(fmt::format("a malformed handshake ({})", error.what()));
      return;
    }
    if (hello.version != TcpStore::kProtocolVersion) {
      refuse(fmt::format("protocol version {}, this store speaks {}", hello.version, TcpStore::kProtocolVersion));
      return;
    }
    if (hello.token != server_.token_) {
      refuse("a wrong job token");
      return;
    }
    greeted_ = true;
    send(Reply{});
    read_frame();
  }

  /// Tells the peer why, logs it, and closes once the reply is out.
  void refuse(const std::string& reason) {
    log_warning("TcpStore: closed the connection from {}: {}", peer_, reason);
    close_after_write_ = true;
    send(Reply{.ok = false, .body = {}, .error = "the store refused the connection: " + reason});
  }

  void write(std::vector<std::byte> bytes) {
    writes_.push_back(std::move(bytes));
    if (writes_.size() == 1) write_next();
  }

  void write_next() {
    asio::async_write(socket_, asio::buffer(writes_.front()),
                      [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                        self->writes_.pop_front();
                        if (error) return;
                        if (!self->writes_.empty()) {
                          self->write_next();
                        } else if (self->close_after_write_) {
                          self->close();
                        }
                      });
  }

  StoreServer& server_;
  asio::ip::tcp::socket socket_;
  std::string peer_;
  std::array<std::byte, 4> header_{};
  std::vector<std::byte> body_;
  std::deque<std::vector<std::byte>> writes_;
  bool greeted_ = false;
  bool close_after_write_ = false;
};

StoreServer::StoreServer(const std::string& host, std::uint16_t port, std::string token, std::size_t max_message_bytes)
    : acceptor_(io_), token_(std::move(token)), max_message_bytes_(max_message_bytes) {
  try {
    asio::ip::tcp::resolver resolver(io_);
    const auto endpoint = resolver.resolve(host, std::to_string(port)).begin()->endpoint();
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
  } catch (const std::system_error& error) {
    DPIPE_THROW(RendezvousError, "TcpStore: cannot serve on {}:{}: {}", host, port, error.code().message());
  }
  accept();
  thread_ = std::thread([this] { io_.run(); });
}

StoreServer::~StoreServer() {
  asio::post(io_, [this] {
    asio::error_code ignored;
    acceptor_.close(ignored);
    waiters_.clear();
    for (const auto& weak : connections_) {
      if (auto connection = weak.lock()) connection->close();
    }
  });
  thread_.join();  // run() returns once the closed sockets' handlers have run
}

void StoreServer::accept() {
  acceptor_.async_accept([this](const asio::error_code& error, asio::ip::tcp::socket socket) {
    if (error) return;  // the acceptor was closed
    auto connection = std::make_shared<Connection>(*this, std::move(socket));
    std::erase_if(connections_, [](const std::weak_ptr<Connection>& weak) { return weak.expired(); });
    connections_.push_back(connection);
    connection->start();
    accept();
  });
}

bool StoreServer::has_all(const std::vector<std::string>& keys) const {
  for (const auto& key : keys) {
    if (!values_.contains(key)) return false;
  }
  return true;
}

void StoreServer::serve(const std::shared_ptr<Connection>& connection, Request request) {
  Reply reply;
  switch (request.op) {
    case Op::kSet:
      values_[request.key] = std::move(request.value);
      break;
    case Op::kGet:
    case Op::kWait: {
      const bool wants_value = request.op == Op::kGet;
      auto keys = wants_value ? std::vector<std::string>{request.key} : std::move(request.keys);
      if (!has_all(keys)) {
        waiters_.push_back(Waiter{connection, std::move(keys), wants_value});
        return;
      }
      if (wants_value) reply.body = values_.at(request.key);
      break;
    }
    case Op::kAdd: {
      auto& value = values_[request.key];
      const auto current = value.empty() ? std::optional<std::int64_t>(0) : as_integer(value);
      if (!current) {
        reply =
            Reply{.ok = false, .body = {}, .error = fmt::format("the value of '{}' is not an integer", request.key)};
        break;
      }
      value = text_bytes(std::to_string(*current + request.delta));
      reply.body = value;
      break;
    }
    case Op::kCompareSet: {
      const auto it = values_.find(request.key);
      const bool matches = it == values_.end() ? request.value.empty() : it->second == request.value;
      if (matches) values_[request.key] = std::move(request.desired);
      reply.body = values_.contains(request.key) ? values_.at(request.key) : std::vector<std::byte>{};
      break;
    }
    case Op::kDelete:
      reply.body = {std::byte{values_.erase(request.key) > 0 ? std::uint8_t{1} : std::uint8_t{0}}};
      break;
  }
  connection->send(reply);
  if (request.op != Op::kDelete && reply.ok) settle_waiters();
}

void StoreServer::settle_waiters() {
  std::erase_if(waiters_, [this](const Waiter& waiter) {
    const auto connection = waiter.connection.lock();
    if (!connection) return true;  // the client gave up (timed out) and closed
    if (!has_all(waiter.keys)) return false;
    connection->send(Reply{.ok = true,
                           .body = waiter.wants_value ? values_.at(waiter.keys.front()) : std::vector<std::byte>{},
                           .error = {}});
    return true;
  });
}

}  // namespace dpipe::detail::store

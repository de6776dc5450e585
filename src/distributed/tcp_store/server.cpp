// StoreServer.

#include "distributed/tcp_store/server.hpp"

#include <algorithm>
#include <array>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <charconv>
#include <cstring>
#include <exception>
#include <mutex>
#include <sys/socket.h>
#include <utility>

#include <fmt/ranges.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/distributed/tcp_store.hpp>
#include <dpipe/serialization/serializer.hpp>

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
    if (server_.stopping_) server_.stop_when_closed();
  }

  /// Closes once the replies already queued are written.
  void finish() {
    if (writes_.empty()) {
      close();
    } else {
      close_after_write_ = true;
    }
  }

  [[nodiscard]] bool open() const { return socket_.is_open(); }
  [[nodiscard]] bool greeted() const noexcept { return greeted_; }
  [[nodiscard]] const std::string& peer() const noexcept { return peer_; }
  [[nodiscard]] const std::optional<Member>& member() const noexcept { return member_; }
  /// The member leaves on purpose: its connection closing is no news any more.
  void leave() noexcept { left_ = true; }

 private:
  void read_frame() {
    asio::async_read(socket_, asio::buffer(header_),
                     [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                       if (error) {
                         self->closed();
                       } else {
                         self->read_body();
                       }
                     });
  }

  /// The peer closed the connection, or it broke: a member that did not leave is gone.
  void closed() {
    if (!member_ || left_ || server_.stopping_) return;
    left_ = true;
    server_.depart(*member_, "its connection to the store closed (the process ended or was killed)", false);
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
                       if (error) {
                         self->closed();
                       } else {
                         self->on_message();
                       }
                     });
  }

  void on_message() {
    if (server_.stopping_) return;  // it was told the store closes
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
    try {
      server_.serve(shared_from_this(), std::move(request));
    } catch (const std::exception& error) {  // out of memory, say: this request, not the store
      refuse(fmt::format("the store could not serve a request ({})", error.what()));
      return;
    }
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
      if (hello.member) server_.refused(*hello.member, "the store refused its connection: a wrong job token");
      return;
    }
    if (hello.member && !server_.admits(*hello.member)) {
      // A rank of rank 0's next loader, come while rank 0's process still serves its previous
      // one: what it says here would leave with this server, so it is sent to the next one.
      close_after_write_ = true;
      send(Reply{.ok = false,
                 .body = {},
                 .failure = Failure::kClosing,
                 .error = fmt::format("the store serves rank 0's loaders {}, not {} yet",
                                      fmt::join(server_.hosted_, ", "), hello.member->name)});
      return;
    }
    if (hello.member) {
      if (auto misfit = server_.misfit(*hello.member)) {
        refuse(*misfit);
        return;
      }
    }
    greeted_ = true;
    member_ = std::move(hello.member);
    if (member_) {
      server_.departed_.erase(*member_);  // it reconnected
      if (member_->rank == 0) {
        server_.hosted_.insert(member_->name);
        server_.loaders_.insert_or_assign(member_->name, *member_);
        server_.settle_refusals(member_->name);
      } else {
        server_.loaders_.try_emplace(member_->name, *member_);
      }
    }
    send(Reply{});
    read_frame();
  }

  /// Tells the peer why, logs it, and closes once the reply is out.
  void refuse(const std::string& reason) {
    log_warning("TcpStore: closed the connection from {}: {}", peer_, reason);
    close_after_write_ = true;
    send(Reply{.ok = false,
               .body = {},
               .failure = Failure::kRendezvous,
               .error = "the store refused the connection: " + reason});
  }

  void write(std::vector<std::byte> bytes) {
    writes_.push_back(std::move(bytes));
    if (writes_.size() == 1) write_next();
  }

  void write_next() {
    asio::async_write(socket_, asio::buffer(writes_.front()),
                      [self = shared_from_this()](const asio::error_code& error, std::size_t) {
                        self->writes_.pop_front();
                        if (error) {
                          self->writes_.clear();
                          return;
                        }
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
  std::optional<Member> member_;
  bool greeted_ = false;
  bool close_after_write_ = false;
  bool left_ = false;
};

StoreServer::StoreServer(const std::string& host, std::uint16_t port, std::string token, std::size_t max_message_bytes)
    : acceptor_(io_),
      cutoff_(io_),
      retry_accept_(io_),
      token_(std::move(token)),
      max_message_bytes_(max_message_bytes) {
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
  // The ranks agree in rounds a request ahead (Store::exchange): a round rank 0 collected may not
  // be collected yet by a rank a request behind, which will ask for it. So the server first
  // lingers while it owes such an answer to a rank still connected (at most the rounds' timeout),
  // serving only the connections it has. Then it sends every reply already decided, tells every
  // client that the store closes on purpose (what a client asks next, it asks the server this
  // process starts next, not a dead rank 0), and closes; a peer that does not read within a
  // second is cut off.
  asio::post(io_, [this] {
    lingering_ = true;
    // Stops listening first: a worker process forked while this server ran holds a copy of the
    // listening socket, and closing ours alone would leave the port listening with nobody
    // accepting (the next server could not bind it; a client would wait in its backlog).
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    asio::error_code ignored;
    acceptor_.close(ignored);
    retry_accept_.cancel();
    std::uint64_t longest = 0;
    for (const auto& [name, round] : rounds_) longest = std::max(longest, round.timeout_ms);
    cutoff_.expires_after(std::chrono::milliseconds(longest));
    cutoff_.async_wait([this](const asio::error_code& cancelled) {
      if (!cancelled) close_all();
    });
    stop_when_settled();
  });
  thread_.join();  // run() returns once the closed sockets' handlers have run
}

void StoreServer::stop_when_closed() {
  for (const auto& weak : connections_) {
    const auto connection = weak.lock();
    if (connection && connection->open()) return;
  }
  cutoff_.cancel();
}

bool StoreServer::owes_answers() const {
  for (const auto& [name, round] : rounds_) {
    if (!round.complete() || round.collections == 0) continue;
    for (std::size_t rank = 0; rank < round.collected.size(); ++rank) {
      if (round.collected[rank]) continue;
      const bool gone = std::ranges::any_of(departed_, [&](const auto& departure) {
        return name.starts_with(departure.first.name) && departure.first.rank == rank;
      });
      if (!gone) return true;
    }
  }
  return false;
}

void StoreServer::stop_when_settled() {
  if (lingering_ && !stopping_ && !owes_answers()) close_all();
}

void StoreServer::close_all() {
  if (stopping_) return;
  stopping_ = true;
  waiters_.clear();
  rounds_.clear();
  const Reply closing{.ok = false,
                      .body = {},
                      .failure = Failure::kClosing,
                      .error = "the store shut down (the loaders of the process serving it are gone)"};
  cutoff_.cancel();
  cutoff_.expires_after(std::chrono::seconds(1));
  cutoff_.async_wait([this](const asio::error_code& cancelled) {
    if (cancelled) return;
    for (const auto& weak : connections_) {
      if (auto connection = weak.lock()) connection->close();
    }
  });
  for (const auto& weak : connections_) {
    if (auto connection = weak.lock()) {
      if (connection->greeted()) connection->send(closing_reply(connection->member(), closing));
      connection->finish();
    }
  }
  stop_when_closed();
}

Reply StoreServer::closing_reply(const std::optional<Member>& member, const Reply& closing) const {
  if (!member) return closing;
  // A rank of a loader whose rank on this process left: what it asks next, no other store answers.
  // The first rank that left is the cause (rank 0 shuts down because rank 1 died: rank 1).
  if (auto gone = first_departure(member->name, member->rank, true)) {
    return Reply{.ok = false, .body = {}, .failure = Failure::kRendezvous, .error = std::move(*gone)};
  }
  return closing;
}

std::optional<std::string> StoreServer::first_departure(const std::string& member, std::uint64_t except,
                                                        bool including_on_purpose) const {
  const std::pair<const Member, Departure>* first = nullptr;
  for (const auto& departure : departed_) {
    const auto& [departed, why] = departure;
    if (departed.name != member || departed.rank == except || (why.on_purpose && !including_on_purpose)) continue;
    if (first == nullptr || why.order < first->second.order) first = &departure;
  }
  if (first == nullptr) return std::nullopt;
  return fmt::format("rank {} is gone: {}", first->first.rank, first->second.why);
}

bool StoreServer::admits(const Member& member) const {
  // A rank that says its world size (a loader's) waits for its rank 0, the one that says what
  // the loader runs; a client of someone's own rank 0 that never greets says none.
  return member.rank == 0 || hosted_.contains(member.name) || (hosted_.empty() && member.world_size == 0);
}

std::optional<std::string> StoreServer::misfit(const Member& member) const {
  constexpr std::string_view kHint =
      "another job on this port? (give each job its own DPIPE_STORE_PORT or DPIPE_STORE_TOKEN)";
  if (const auto first = loaders_.find(member.name); first != loaders_.end() && member.rank != 0) {
    const Member& other = first->second;
    if (member.world_size != other.world_size || member.fingerprint != other.fingerprint) {
      return fmt::format(
          "rank {} of loader '{}' runs a world of {} ranks with the fingerprint {}, but rank {} of it a world of {} "
          "ranks with the fingerprint {}: {}",
          member.rank, member.name, member.world_size, member.fingerprint, other.rank, other.world_size,
          other.fingerprint, kHint);
    }
  }
  for (const auto& weak : connections_) {
    const auto connection = weak.lock();
    if (!connection || !connection->open() || !connection->greeted() || !connection->member()) continue;
    const Member& other = *connection->member();
    if (other.name == member.name && other.rank == member.rank) {
      return fmt::format("rank {} of loader '{}' is connected already (from {}): {}", member.rank, member.name,
                         connection->peer(), kHint);
    }
  }
  return std::nullopt;
}

void StoreServer::refused(const Member& member, const std::string& reason) {
  constexpr std::size_t kRefusalsKept = 64;
  const auto loader = loaders_.find(member.name);
  if (loader == loaders_.end() || loader->second.rank != 0) {
    // Its rank 0 has not said yet what the loader runs: decided when it does.
    if (refusals_.size() < kRefusalsKept) refusals_.emplace_back(member, reason);
    return;
  }
  Member seat = member;
  seat.world_size = loader->second.world_size;
  seat.fingerprint = loader->second.fingerprint;
  if (seat == member && !misfit(member)) depart(member, reason, false);
}

void StoreServer::settle_refusals(const std::string& loader) {
  std::vector<std::pair<Member, std::string>> pending;
  std::erase_if(refusals_, [&](auto& refusal) {
    if (refusal.first.name != loader) return false;
    pending.push_back(std::move(refusal));
    return true;
  });
  for (const auto& [member, reason] : pending) refused(member, reason);
}

std::shared_ptr<StoreServer> StoreServer::shared(const std::string& host, std::uint16_t port, const std::string& token,
                                                 std::size_t max_message_bytes) {
  if (port == 0) return std::make_shared<StoreServer>(host, port, token, max_message_bytes);
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<StoreServer>> servers;
  const std::lock_guard lock(mutex);
  auto& slot = servers[fmt::format("{}:{}", host, port)];
  if (auto server = slot.lock()) {
    if (server->token_ != token) {
      DPIPE_THROW(RendezvousError,
                  "TcpStore: this process already serves a store on {}:{} for another job token; give the second "
                  "job another port",
                  host, port);
    }
    return server;
  }
  auto server = std::make_shared<StoreServer>(host, port, token, max_message_bytes);
  slot = server;
  return server;
}

void StoreServer::accept() {
  acceptor_.async_accept([this](const asio::error_code& error, asio::ip::tcp::socket socket) {
    if (error == asio::error::operation_aborted || !acceptor_.is_open()) return;  // the acceptor was closed
    if (error) {
      // Out of descriptors, say: try again shortly rather than stop accepting for good.
      log_warning("TcpStore: accepting a connection failed: {}; trying again", error.message());
      retry_accept_.expires_after(std::chrono::milliseconds(100));
      retry_accept_.async_wait([this](const asio::error_code& cancelled) {
        if (!cancelled && acceptor_.is_open()) accept();
      });
      return;
    }
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
        reply = Reply{.ok = false,
                      .body = {},
                      .failure = Failure::kInvalid,
                      .error = fmt::format("the value of '{}' is not an integer", request.key)};
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
    case Op::kExchange:
      exchange(connection, std::move(request));
      return;
    case Op::kLeave:
      connection->send(reply);
      if (const auto& member = connection->member()) {
        connection->leave();
        if (member->rank == 0) hosted_.erase(member->name);
        depart(*member, "it shut its loader down", true);
      }
      return;
    case Op::kWatch:
      if (auto gone = first_departure(request.key, request.rank, false)) {
        connection->send(Reply{.ok = false, .body = {}, .failure = Failure::kRendezvous, .error = std::move(*gone)});
      } else {
        std::erase_if(watchers_, [](const Watcher& watcher) { return watcher.connection.expired(); });
        watchers_.push_back(Watcher{connection, std::move(request.key), request.rank});
      }
      return;
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
                           .failure = Failure::kInvalid,
                           .error = {}});
    return true;
  });
}

namespace {

Reply invalid(std::string error) {
  return Reply{.ok = false, .body = {}, .failure = Failure::kInvalid, .error = std::move(error)};
}

}  // namespace

void StoreServer::exchange(const std::shared_ptr<Connection>& connection, Request request) {
  constexpr std::uint64_t kMaxWorldSize = std::uint64_t{1} << 20;
  if (request.world_size > kMaxWorldSize) {
    connection->send(invalid(fmt::format("a world of {} ranks is more than this store serves ({})",
                                         request.world_size, kMaxWorldSize)));
    return;
  }
  if (request.rank >= request.world_size) {
    connection->send(invalid(fmt::format("rank {} is outside a world of {}", request.rank, request.world_size)));
    return;
  }
  if (!request.key.empty()) {
    if (auto error = arrive(request.key, request)) {
      connection->send(invalid(*error));
      return;
    }
  }
  if (request.collect.empty()) {
    connection->send(Reply{});
    return;
  }
  collect(connection, request.collect, request);
}

StoreServer::Round* StoreServer::open_round(const std::string& name, const Request& request, std::string& error) {
  const std::uint64_t world_size = request.world_size;
  const std::uint64_t timeout_ms = request.timeout_ms;
  auto [it, inserted] = rounds_.try_emplace(name);
  Round& round = it->second;
  if (!inserted) {
    if (round.values.size() == world_size) return &round;
    error = fmt::format("the world has {} ranks, an earlier rank said {}", world_size, round.values.size());
    return nullptr;
  }
  round.values.resize(world_size);
  round.collected.resize(world_size);
  round.timeout_ms = timeout_ms;
  if (timeout_ms > 0) {
    round.deadline = std::make_unique<asio::steady_timer>(io_, std::chrono::milliseconds(timeout_ms));
    round.deadline->async_wait([this, name, timeout_ms](const asio::error_code& cancelled) {
      const auto found = rounds_.find(name);
      if (cancelled || found == rounds_.end() || found->second.complete()) return;
      std::vector<std::size_t> missing;
      for (std::size_t rank = 0; rank < found->second.values.size(); ++rank) {
        if (!found->second.values[rank]) missing.push_back(rank);
      }
      fail_round(name, Failure::kTimeout,
                 fmt::format("rank{} {} did not arrive within {} ms", missing.size() == 1 ? "" : "s",
                             fmt::join(missing, ", "), timeout_ms));
    });
  }
  if (request.stall_warning_ms > 0) {
    round.stall = std::make_unique<asio::steady_timer>(io_);
    warn_when_stalled(name, std::chrono::milliseconds(request.stall_warning_ms), std::chrono::steady_clock::now());
  }
  return &round;
}

void StoreServer::warn_when_stalled(const std::string& name, std::chrono::milliseconds interval,
                                    std::chrono::steady_clock::time_point opened) {
  const auto found = rounds_.find(name);
  if (found == rounds_.end() || !found->second.stall) return;
  found->second.stall->expires_after(interval);
  found->second.stall->async_wait([this, name, interval, opened](const asio::error_code& cancelled) {
    const auto round = rounds_.find(name);
    if (cancelled || round == rounds_.end() || round->second.complete()) return;
    std::vector<std::size_t> missing;
    for (std::size_t rank = 0; rank < round->second.values.size(); ++rank) {
      if (!round->second.values[rank]) missing.push_back(rank);
    }
    const auto waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count();
    const Reply notice{.ok = false,
                       .body = {},
                       .failure = Failure::kStalled,
                       .error = fmt::format("rank{} {} {} not arrived after {:.1f} s", missing.size() == 1 ? "" : "s",
                                            fmt::join(missing, ", "), missing.size() == 1 ? "has" : "have", waited)};
    for (const auto& collector : round->second.waiting) {
      if (auto connection = collector.connection.lock()) connection->send(notice);
    }
    warn_when_stalled(name, interval, opened);
  });
}

std::optional<std::string> StoreServer::arrive(const std::string& name, Request& request) {
  if (failed_rounds_.contains(name)) return std::nullopt;  // whoever collects it hears why
  std::string error;
  Round* round = open_round(name, request, error);
  if (round == nullptr) return fmt::format("rank {} says {}", request.rank, error);
  if (round->values[request.rank]) {
    // The same post again (a client re-posting after its server closed, to a server that took
    // the first) changes nothing.
    if (*round->values[request.rank] == request.value) return std::nullopt;
    return fmt::format("rank {} arrived twice, with another value", request.rank);
  }
  round->values[request.rank] = std::move(request.value);
  ++round->arrived;
  if (round->complete()) {
    if (round->deadline) round->deadline->cancel();
    if (round->stall) round->stall->cancel();
    const auto waiting = std::exchange(round->waiting, {});
    deliver(rounds_.find(name), waiting);
  } else if (auto why = departed_from(name, *round)) {
    fail_round(name, Failure::kRendezvous, *why);
  }
  return std::nullopt;
}

void StoreServer::collect(const std::shared_ptr<Connection>& connection, const std::string& name,
                          const Request& request) {
  if (const auto failed = failed_rounds_.find(name); failed != failed_rounds_.end()) {
    connection->send(failed->second);
    return;
  }
  std::string error;
  Round* round = open_round(name, request, error);
  if (round == nullptr) {
    connection->send(invalid(fmt::format("rank {} says {}", request.rank, error)));
    return;
  }
  if (round->complete()) {
    deliver(rounds_.find(name), {Collector{connection, request.rank}});
    return;
  }
  round->waiting.push_back(Collector{connection, request.rank});
  if (auto why = departed_from(name, *round)) fail_round(name, Failure::kRendezvous, *why);
}

void StoreServer::deliver(std::map<std::string, Round>::iterator round, const std::vector<Collector>& collectors) {
  std::vector<std::vector<std::byte>> values;
  values.reserve(round->second.values.size());
  for (const auto& value : round->second.values) values.push_back(*value);
  Reply reply;
  ByteWriter(reply.body).write(values);
  for (const auto& collector : collectors) {
    if (auto connection = collector.connection.lock()) connection->send(reply);
    if (!round->second.collected[collector.rank]) {
      round->second.collected[collector.rank] = true;
      ++round->second.collections;
    }
  }
  if (round->second.collections >= round->second.values.size()) rounds_.erase(round);
  stop_when_settled();
}

std::optional<std::string> StoreServer::departed_from(const std::string& round, const Round& state) const {
  const std::pair<const Member, Departure>* first = nullptr;
  for (const auto& departure : departed_) {
    const Member& member = departure.first;
    if (!round.starts_with(member.name) || member.rank >= state.values.size() || state.values[member.rank]) continue;
    if (first == nullptr || departure.second.order < first->second.order) first = &departure;
  }
  if (first == nullptr) return std::nullopt;
  return fmt::format("rank {} is gone: {}", first->first.rank, first->second.why);
}

void StoreServer::depart(const Member& member, const std::string& why, bool on_purpose) {
  departed_[member] = Departure{why, ++departures_, on_purpose};
  if (!on_purpose) {
    // The ranks that hand out elements already agreed hear of it now, not at their next round.
    const Reply notice{.ok = false,
                       .body = {},
                       .failure = Failure::kRendezvous,
                       .error = fmt::format("rank {} is gone: {}", member.rank, why)};
    std::erase_if(watchers_, [&](const Watcher& watcher) {
      const auto connection = watcher.connection.lock();
      if (!connection) return true;
      if (watcher.member != member.name || watcher.rank == member.rank) return false;
      connection->send(notice);
      return true;
    });
  }
  std::vector<std::pair<std::string, std::string>> failing;
  for (const auto& [name, round] : rounds_) {
    if (auto reason = departed_from(name, round)) failing.emplace_back(name, std::move(*reason));
  }
  for (const auto& [name, reason] : failing) fail_round(name, Failure::kRendezvous, reason);
  stop_when_settled();
}

void StoreServer::fail_round(const std::string& round, Failure failure, const std::string& error) {
  constexpr std::size_t kFailedRoundsKept = 256;
  const Reply reply{.ok = false, .body = {}, .failure = failure, .error = error};
  if (const auto found = rounds_.find(round); found != rounds_.end()) {
    for (const auto& collector : found->second.waiting) {
      if (auto waiting = collector.connection.lock()) waiting->send(reply);
    }
    rounds_.erase(found);
  }
  if (failed_rounds_.emplace(round, reply).second) failed_order_.push_back(round);
  if (failed_order_.size() > kFailedRoundsKept) {
    failed_rounds_.erase(failed_order_.front());
    failed_order_.pop_front();
  }
}

}  // namespace dpipe::detail::store

// TcpStore: a client of the store (and, on rank 0, its server).

#include <algorithm>
#include <array>
#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <charconv>
#include <cstring>
#include <thread>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/distributed/tcp_store.hpp>

#include "distributed/tcp_store/protocol.hpp"
#include "distributed/tcp_store/server.hpp"

namespace dpipe {

using detail::store::Op;
using detail::store::Reply;
using detail::store::Request;
using Clock = std::chrono::steady_clock;

struct TcpStore::Impl {
  explicit Impl(TcpStoreOptions store_options) : options(std::move(store_options)) {}

  /// Connects (retrying with backoff while the server is not up) and shakes hands.
  void connect(Clock::time_point deadline) {
    const std::string where = fmt::format("{}:{}", options.host, port);
    std::chrono::milliseconds backoff(10);
    asio::error_code last;
    while (true) {
      asio::ip::tcp::resolver resolver(io);
      asio::error_code resolve_error;
      const auto endpoints = resolver.resolve(options.host, std::to_string(port), resolve_error);
      if (resolve_error) {
        DPIPE_THROW(InvalidArgument, "TcpStore: the host '{}' does not resolve: {}", options.host,
                    resolve_error.message());
      }
      last = asio::error::would_block;
      asio::async_connect(socket, endpoints, [&](const asio::error_code& error, const auto&) { last = error; });
      if (run_until(deadline) && !last) break;
      close();
      const auto now = Clock::now();
      if (now >= deadline) {
        DPIPE_THROW(RendezvousError, "TcpStore: cannot reach the store at {} within {} ms ({})", where,
                    options.timeout.count(), last == asio::error::would_block ? "no answer" : last.message());
      }
      std::this_thread::sleep_for(
          std::min(backoff, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
    const Reply welcome = exchange(detail::store::encode(detail::store::Hello{kProtocolVersion, options.token}),
                                   deadline, "the handshake");
    if (!welcome.ok) {
      close();
      DPIPE_THROW(RendezvousError, "TcpStore: {} ({})", welcome.error, where);
    }
    connected = true;
  }

  /// Sends `request` and returns the reply's body; throws the error the server replied with.
  std::vector<std::byte> call(const Request& request) {
    const auto deadline = Clock::now() + options.timeout;
    if (!connected) connect(deadline);
    const Reply reply = exchange(detail::store::encode(request), deadline, detail::store::describe(request));
    if (!reply.ok) DPIPE_THROW(InvalidArgument, "TcpStore: {}: {}", detail::store::describe(request), reply.error);
    return reply.body;
  }

  /// Writes one framed message and reads the framed reply, by `deadline`.
  Reply exchange(const std::vector<std::byte>& message, Clock::time_point deadline, const std::string& what) {
    const auto framed = detail::store::frame(message);
    asio::error_code result = asio::error::would_block;
    asio::async_write(socket, asio::buffer(framed),
                      [&](const asio::error_code& error, std::size_t) { result = error; });
    finish(result, deadline, what);
    std::array<std::byte, 4> header{};
    result = asio::error::would_block;
    asio::async_read(socket, asio::buffer(header), [&](const asio::error_code& error, std::size_t) { result = error; });
    finish(result, deadline, what);
    std::uint32_t size = 0;
    std::memcpy(&size, header.data(), sizeof(size));
    if (size > options.max_message_bytes) {
      close();
      DPIPE_THROW(RendezvousError, "TcpStore: {}: the store sent a reply of {} bytes, over the limit of {}", what, size,
                  options.max_message_bytes);
    }
    std::vector<std::byte> body(size);
    result = asio::error::would_block;
    asio::async_read(socket, asio::buffer(body), [&](const asio::error_code& error, std::size_t) { result = error; });
    finish(result, deadline, what);
    try {
      return detail::store::decode_reply(body);
    } catch (const SerializationError& error) {
      close();
      DPIPE_THROW(RendezvousError, "TcpStore: {}: a malformed reply from the store ({})", what, error.what());
    }
  }

  /// Runs the pending operation to its end or to `deadline`; a timeout or an error closes the
  /// connection (the next call reconnects) and throws.
  void finish(const asio::error_code& result, Clock::time_point deadline, const std::string& what) {
    if (!run_until(deadline)) {
      close();
      DPIPE_THROW(TimeoutError, "TcpStore: {} timed out after {} ms", what, options.timeout.count());
    }
    if (result) {
      close();
      DPIPE_THROW(RendezvousError, "TcpStore: {}: the connection to the store at {}:{} failed: {}", what, options.host,
                  port, result.message());
    }
  }

  /// Runs the event loop until its work is done (true) or `deadline` passes (false, the work is
  /// cancelled).
  bool run_until(Clock::time_point deadline) {
    io.restart();
    io.run_until(deadline);
    if (io.stopped()) return true;
    close();  // cancels the operation; its handler runs below
    io.restart();
    io.run();
    return false;
  }

  void close() {
    asio::error_code ignored;
    socket.close(ignored);
    connected = false;
  }

  TcpStoreOptions options;
  std::uint16_t port = 0;
  std::unique_ptr<detail::store::StoreServer> server;
  asio::io_context io;
  asio::ip::tcp::socket socket{io};
  bool connected = false;
};

TcpStore::TcpStore(TcpStoreOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  if (impl_->options.timeout <= std::chrono::milliseconds(0)) {
    DPIPE_THROW(InvalidArgument, "TcpStore: the timeout must be positive, got {} ms", impl_->options.timeout.count());
  }
  impl_->port = impl_->options.port;
  if (impl_->options.serve) {
    impl_->server = std::make_unique<detail::store::StoreServer>(
        impl_->options.host, impl_->options.port, impl_->options.token, impl_->options.max_message_bytes);
    impl_->port = impl_->server->port();
  } else if (impl_->port == 0) {
    DPIPE_THROW(InvalidArgument, "TcpStore: a client needs the store's port");
  }
  impl_->connect(Clock::now() + impl_->options.timeout);
}

TcpStore::~TcpStore() {
  impl_->close();
  impl_->server.reset();
}

void TcpStore::set(const std::string& key, std::span<const std::byte> value) {
  impl_->call(Request{
      .op = Op::kSet, .key = key, .value = {value.begin(), value.end()}, .desired = {}, .delta = 0, .keys = {}});
}

std::vector<std::byte> TcpStore::get(const std::string& key) {
  return impl_->call(Request{.op = Op::kGet, .key = key, .value = {}, .desired = {}, .delta = 0, .keys = {}});
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  const auto text =
      impl_->call(Request{.op = Op::kAdd, .key = key, .value = {}, .desired = {}, .delta = delta, .keys = {}});
  std::int64_t sum = 0;
  const auto* first = reinterpret_cast<const char*>(text.data());
  std::from_chars(first, first + text.size(), sum);
  return sum;
}

std::vector<std::byte> TcpStore::compare_set(const std::string& key, std::span<const std::byte> expected,
                                             std::span<const std::byte> desired) {
  return impl_->call(Request{.op = Op::kCompareSet,
                             .key = key,
                             .value = {expected.begin(), expected.end()},
                             .desired = {desired.begin(), desired.end()},
                             .delta = 0,
                             .keys = {}});
}

void TcpStore::wait(const std::vector<std::string>& keys) {
  impl_->call(Request{.op = Op::kWait, .key = {}, .value = {}, .desired = {}, .delta = 0, .keys = keys});
}

bool TcpStore::remove(const std::string& key) {
  const auto existed =
      impl_->call(Request{.op = Op::kDelete, .key = key, .value = {}, .desired = {}, .delta = 0, .keys = {}});
  return !existed.empty() && existed.front() == std::byte{1};
}

std::chrono::milliseconds TcpStore::timeout() const { return impl_->options.timeout; }

void TcpStore::set_timeout(std::chrono::milliseconds timeout) {
  if (timeout <= std::chrono::milliseconds(0)) {
    DPIPE_THROW(InvalidArgument, "TcpStore: the timeout must be positive, got {} ms", timeout.count());
  }
  impl_->options.timeout = timeout;
}

std::uint16_t TcpStore::port() const noexcept { return impl_->port; }

}  // namespace dpipe

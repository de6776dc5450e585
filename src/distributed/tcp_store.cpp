// TcpStore: a client of the store (and, on rank 0, its server).

#include <algorithm>
#include <array>
#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/distributed/tcp_store.hpp>
#include <dpipe/serialization/serializer.hpp>

#include "distributed/tcp_store/protocol.hpp"
#include "distributed/tcp_store/server.hpp"

namespace dpipe {

using detail::store::Op;
using detail::store::Reply;
using detail::store::Request;
using Clock = std::chrono::steady_clock;

struct TcpStore::Impl {
  explicit Impl(TcpStoreOptions store_options) : options(std::move(store_options)) {}

  class Watch;

  /// Connects and shakes hands, retrying with backoff while no server is up (or one is closing
  /// on purpose) until `deadline`; after a server closed on purpose, posts again to the next one
  /// what it took with it (post_again). Throws RendezvousError for a refusal, or when the
  /// deadline passes.
  void connect(Clock::time_point deadline) {
    // What the last attempt that ended met (a store that closed on purpose, first).
    std::string failure = closing.empty() ? "no answer" : closing;
    const std::string where = fmt::format("{}:{}", options.host, port);
    // The first retries come soon: the ranks of a job start together, and rank 0 may still be
    // opening its store when the others first knock.
    std::chrono::microseconds backoff(250);
    const auto start = Clock::now();
    auto next_warning = start + options.stall_warning;
    while (true) {
      if (auto refused = attempt(deadline, failure)) {
        DPIPE_THROW(RendezvousError, "TcpStore: {} ({})", *refused, where);
      }
      if (connected) {
        // A successor of a server that closed on purpose first gets what that one took with it.
        if (closing.empty() || post_again(deadline)) {
          watch_departures(deadline);
          return;
        }
        failure = closing;  // it closes too
      }
      close();
      const auto now = Clock::now();
      if (now >= deadline) {
        DPIPE_THROW(RendezvousError, "TcpStore: cannot reach the store at {} within {} ms ({})", where,
                    options.timeout.count(), failure);
      }
      if (options.stall_warning.count() > 0 && now >= next_warning) {
        next_warning = now + options.stall_warning;
        log_warning(
            "TcpStore: no store at {} after {:.1f} s ({}): rank 0 serves it; still trying (up to the timeout "
            "of {} ms)",
            where, std::chrono::duration<double>(now - start).count(), failure, options.timeout.count());
      }
      std::this_thread::sleep_for(
          std::min(backoff, std::chrono::duration_cast<std::chrono::microseconds>(deadline - now)));
      // A store that closes on purpose is replaced within moments: ask its successor soon.
      backoff =
          std::min<std::chrono::microseconds>(backoff * 2, std::chrono::milliseconds(closing.empty() ? 1000 : 100));
    }
  }

  /// One connection attempt: connected, or `failure` says why not, or the server's refusal is
  /// returned.
  std::optional<std::string> attempt(Clock::time_point deadline, std::string& failure) {
    asio::ip::tcp::resolver resolver(io);
    asio::error_code resolve_error;
    const auto endpoints = resolver.resolve(options.host, std::to_string(port), resolve_error);
    if (resolve_error) {
      DPIPE_THROW(InvalidArgument, "TcpStore: the host '{}' does not resolve: {}", options.host,
                  resolve_error.message());
    }
    asio::error_code result = asio::error::would_block;
    asio::async_connect(socket, endpoints, [&](const asio::error_code& error, const auto&) { result = error; });
    if (!run_until(deadline)) return std::nullopt;
    if (result) {
      if (closing.empty()) failure = result.message();
      return std::nullopt;
    }
    detail::store::Hello hello{kProtocolVersion, options.token, std::nullopt};
    if (options.rank) {
      hello.member = detail::store::Member{options.member, *options.rank, options.world_size, options.fingerprint};
    }
    Reply welcome;
    try {
      welcome = exchange(detail::store::encode(hello), deadline, "the handshake");
    } catch (const RendezvousError& error) {  // a server that was closing as we came
      failure = error.what();
      return std::nullopt;
    } catch (const TimeoutError&) {
      return std::nullopt;
    }
    if (welcome.ok) {
      connected = true;
      return std::nullopt;
    }
    if (welcome.failure == detail::store::Failure::kClosing) {
      closed_on_purpose(welcome);
      failure = closing;
      return std::nullopt;
    }
    return welcome.error;
  }

  /// Sends `request` and returns the reply's body; throws the error the server replied with.
  /// `grace` extends the wait for a request whose own timeout the server enforces.
  /// A store that closes on purpose (its process starts another server for its next loader) is
  /// asked again, once it is back, up to the deadline; the posts it took with it are posted to
  /// the new one first (post_again).
  std::vector<std::byte> call(const Request& request, std::chrono::milliseconds grace = std::chrono::milliseconds(0)) {
    const auto deadline = Clock::now() + options.timeout + grace;
    const std::string what = detail::store::describe(request);
    while (true) {
      if (!connected) connect(deadline);
      Reply reply = exchange(detail::store::encode(request), deadline, what);
      while (!reply.ok && reply.failure == detail::store::Failure::kStalled) {
        log_warning("TcpStore: {}: {}; still waiting (up to the timeout of {} ms)", what, reply.error,
                    options.timeout.count());
        reply = receive(deadline, what);
      }
      if (reply.ok) return reply.body;
      if (reply.failure == detail::store::Failure::kClosing) {
        closed_on_purpose(reply);
        if (request.op == Op::kLeave) return {};
        continue;
      }
      throw_failure(reply, what);
    }
  }

  /// Posts `uncollected_posts` to the server just connected, which replaced one that closed on
  /// purpose, and forgets that one. False when this one closes too.
  bool post_again(Clock::time_point deadline) {
    for (const Request& post : uncollected_posts) {
      const std::string what = detail::store::describe(post);
      const Reply reply = exchange(detail::store::encode(post), deadline, what);
      if (reply.ok) continue;
      if (reply.failure == detail::store::Failure::kClosing) {
        closed_on_purpose(reply);
        return false;
      }
      throw_failure(reply, what);
    }
    closing.clear();
    return true;
  }

  /// The server said it closes on purpose (or is not yet the one to ask): closes the connection;
  /// the next server is asked, and given the posts first.
  void closed_on_purpose(const Reply& notice) {
    close();
    closing = notice.error + ", and no store came back";
  }

  /// Throws the exception matching the server's refusal of `what`.
  [[noreturn]] static void throw_failure(const Reply& reply, const std::string& what) {
    switch (reply.failure) {
      case detail::store::Failure::kRendezvous:
      case detail::store::Failure::kClosing:
      case detail::store::Failure::kStalled:  // only a collection hears it, and waits on
        DPIPE_THROW(RendezvousError, "TcpStore: {}: {}", what, reply.error);
      case detail::store::Failure::kTimeout:
        DPIPE_THROW(TimeoutError, "TcpStore: {}: {}", what, reply.error);
      case detail::store::Failure::kInvalid:
        break;
    }
    DPIPE_THROW(InvalidArgument, "TcpStore: {}: {}", what, reply.error);
  }

  /// Writes one framed message and reads the framed reply, by `deadline`.
  Reply exchange(const std::vector<std::byte>& message, Clock::time_point deadline, const std::string& what) {
    send(message, deadline, what);
    return receive(deadline, what);
  }

  /// Writes one framed message by `deadline`.
  void send(const std::vector<std::byte>& message, Clock::time_point deadline, const std::string& what) {
    const auto framed = detail::store::frame(message);
    asio::error_code result = asio::error::would_block;
    asio::async_write(socket, asio::buffer(framed),
                      [&](const asio::error_code& error, std::size_t) { result = error; });
    finish(result, deadline, what);
  }

  /// Reads one framed reply by `deadline`.
  Reply receive(Clock::time_point deadline, const std::string& what) {
    std::array<std::byte, 4> header{};
    asio::error_code result = asio::error::would_block;
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

  /// With a rank and on_departure: watches the server just connected for departures, unless a
  /// watch of it runs already.
  void watch_departures(Clock::time_point deadline);

  TcpStoreOptions options;
  /// The exchanges that posted without collecting since this client's last collection: a server
  /// that closes on purpose takes them with it, so they are posted to the next one. (A collection
  /// that succeeded shows the server holds a round of the loader of rank 0's process, whose
  /// server lives as long as that loader; what was posted before it stays where it is.)
  std::vector<Request> uncollected_posts;
  /// The notice of the last server that closed on purpose, until its successor took the posts
  /// again (kept across calls: a call that timed out meanwhile leaves them to the next call).
  std::string closing;
  std::uint16_t port = 0;
  std::shared_ptr<detail::store::StoreServer> server;
  asio::io_context io;
  asio::ip::tcp::socket socket{io};
  bool connected = false;
  std::unique_ptr<Watch> watch;  // of the server connected, once it started
};

/// A second connection of a rank's client, on which it asks the server (op kWatch) to be told when
/// another rank of its member is gone without leaving; a thread of its own waits for that answer
/// and hands it to on_departure. The server closing on purpose is no news: the client watches its
/// successor. The connection closing without a word is: the process serving the store died.
class TcpStore::Impl::Watch {
 public:
  /// Connects (as nobody) and asks; throws as TcpStore's calls do when it cannot by `deadline`.
  Watch(const TcpStoreOptions& options, std::uint16_t port, Clock::time_point deadline) {
    TcpStoreOptions nobody = options;
    nobody.rank.reset();
    nobody.on_departure = nullptr;
    nobody.stall_warning = std::chrono::milliseconds(0);
    Impl client(std::move(nobody));
    client.port = port;
    client.connect(deadline);
    Request request;
    request.op = Op::kWatch;
    request.key = options.member;
    request.rank = *options.rank;
    client.send(detail::store::encode(request), deadline, detail::store::describe(request));
    // The thread reads with plain blocking calls on a descriptor of its own; the destructor ends
    // it by shutting that descriptor down, which it closes only once the thread is joined.
    fd_ = ::dup(client.socket.native_handle());
    if (fd_ < 0) DPIPE_THROW(RendezvousError, "TcpStore: cannot watch the store: dup: {}", std::strerror(errno));
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    thread_ =
        std::thread([this, notice = options.on_departure, limit = options.max_message_bytes] { wait(notice, limit); });
  }
  ~Watch() {
    stopping_.store(true);
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  /// The server closed on purpose (or the watch ended otherwise): the next server needs a watch.
  [[nodiscard]] bool ended() const noexcept { return ended_.load(); }

 private:
  void wait(const std::function<void(const std::string&)>& notice, std::size_t limit) {
    std::array<std::byte, 4> header{};
    std::uint32_t size = 0;
    std::vector<std::byte> body;
    std::optional<Reply> reply;
    if (read_all(header)) {
      std::memcpy(&size, header.data(), sizeof(size));
      body.resize(std::min<std::size_t>(size, limit));
      if (size <= limit && read_all(body)) {
        try {
          reply = detail::store::decode_reply(body);
        } catch (const SerializationError&) {
          // Not a dpipe store: nothing to report about the ranks.
        }
      }
    }
    if (!stopping_.load()) {
      if (!reply) {
        notice(
            "rank 0 is gone: the store it served closed the connection without a word (its process ended or was "
            "killed)");
      } else if (!reply->ok && reply->failure == detail::store::Failure::kRendezvous) {
        notice(reply->error);
      }
    }
    ended_.store(true);
  }

  /// Reads `bytes` whole; false at the end of the stream or an error.
  bool read_all(std::span<std::byte> bytes) const {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const auto got = ::recv(fd_, bytes.data() + done, bytes.size() - done, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      done += static_cast<std::size_t>(got);
    }
    return true;
  }

  int fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> ended_{false};
  std::thread thread_;
};

void TcpStore::Impl::watch_departures(Clock::time_point deadline) {
  if (!options.rank || !options.on_departure || (watch && !watch->ended())) return;
  watch.reset();
  watch = std::make_unique<Watch>(options, port, deadline);
}

namespace {

/// Throws InvalidArgument unless `timeout` is positive and at most a year (deadlines are computed
/// by adding it to the clock).
void check_timeout(std::chrono::milliseconds timeout) {
  constexpr std::chrono::milliseconds kLongest = std::chrono::hours(24 * 365);
  if (timeout <= std::chrono::milliseconds(0) || timeout > kLongest) {
    DPIPE_THROW(InvalidArgument, "TcpStore: the timeout must be positive and at most a year, got {} ms",
                timeout.count());
  }
}

}  // namespace

TcpStore::TcpStore(TcpStoreOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  check_timeout(impl_->options.timeout);
  impl_->port = impl_->options.port;
  if (impl_->options.serve) {
    impl_->server = detail::store::StoreServer::shared(impl_->options.host, impl_->options.port, impl_->options.token,
                                                       impl_->options.max_message_bytes);
    impl_->port = impl_->server->port();
  } else if (impl_->port == 0) {
    DPIPE_THROW(InvalidArgument, "TcpStore: a client needs the store's port");
  }
  impl_->connect(Clock::now() + impl_->options.timeout);
}

TcpStore::~TcpStore() {
  impl_->watch.reset();
  impl_->close();
  impl_->server.reset();
}

namespace {

/// A request for `op` on `key`; the caller fills what else the operation carries.
Request request_for(Op op, std::string key = {}) {
  Request request;
  request.op = op;
  request.key = std::move(key);
  return request;
}

std::vector<std::byte> copy_of(std::span<const std::byte> bytes) { return {bytes.begin(), bytes.end()}; }

}  // namespace

void TcpStore::set(const std::string& key, std::span<const std::byte> value) {
  auto request = request_for(Op::kSet, key);
  request.value = copy_of(value);
  impl_->call(request);
}

std::vector<std::byte> TcpStore::get(const std::string& key) { return impl_->call(request_for(Op::kGet, key)); }

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  auto request = request_for(Op::kAdd, key);
  request.delta = delta;
  const auto text = impl_->call(request);
  std::int64_t sum = 0;
  const auto* first = reinterpret_cast<const char*>(text.data());
  std::from_chars(first, first + text.size(), sum);
  return sum;
}

std::vector<std::byte> TcpStore::compare_set(const std::string& key, std::span<const std::byte> expected,
                                             std::span<const std::byte> desired) {
  auto request = request_for(Op::kCompareSet, key);
  request.value = copy_of(expected);
  request.desired = copy_of(desired);
  return impl_->call(request);
}

void TcpStore::wait(const std::vector<std::string>& keys) {
  auto request = request_for(Op::kWait);
  request.keys = keys;
  impl_->call(request);
}

bool TcpStore::remove(const std::string& key) {
  const auto existed = impl_->call(request_for(Op::kDelete, key));
  return !existed.empty() && existed.front() == std::byte{1};
}

std::vector<std::vector<std::byte>> TcpStore::exchange(const std::string& post, std::span<const std::byte> value,
                                                       const std::string& collect, std::size_t rank,
                                                       std::size_t world_size) {
  // The server fails a round at its timeout and says who is missing; the client waits a little
  // longer for that answer.
  constexpr std::chrono::milliseconds kGrace(1000);
  auto request = request_for(Op::kExchange, post);
  request.value = copy_of(value);
  request.collect = collect;
  request.rank = rank;
  request.world_size = world_size;
  request.timeout_ms = static_cast<std::uint64_t>(impl_->options.timeout.count());
  request.stall_warning_ms = static_cast<std::uint64_t>(impl_->options.stall_warning.count());
  const auto body = impl_->call(request, kGrace);
  if (collect.empty()) {
    if (!post.empty()) impl_->uncollected_posts.push_back(std::move(request));
    return {};
  }
  impl_->uncollected_posts.clear();
  ByteReader reader(body);
  auto values = reader.read<std::vector<std::vector<std::byte>>>();
  if (!reader.at_end() || values.size() != world_size) {
    DPIPE_THROW(RendezvousError, "TcpStore: {}: a malformed reply from the store", detail::store::describe(request));
  }
  return values;
}

void TcpStore::leave() noexcept {
  impl_->watch.reset();  // its own leaving, or rank 0's store closing after it, is no news
  try {
    if (impl_->connected) impl_->call(request_for(Op::kLeave));
  } catch (const std::exception&) {
    // The store is gone already (rank 0 shut down first): nothing to tell it.
  }
  impl_->close();
}

std::chrono::milliseconds TcpStore::timeout() const { return impl_->options.timeout; }

void TcpStore::set_timeout(std::chrono::milliseconds timeout) {
  check_timeout(timeout);
  impl_->options.timeout = timeout;
}

std::uint16_t TcpStore::port() const noexcept { return impl_->port; }

}  // namespace dpipe

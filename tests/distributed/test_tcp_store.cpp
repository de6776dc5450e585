// TcpStore over real sockets on loopback: every operation, waiting and timeouts, a client that
// starts before the server, another process, refused connections, a server that goes away, and a
// fuzz test of the message decoders.

#include <arpa/inet.h>
#include <cstring>
#include <memory>
#include <netinet/in.h>
#include <optional>
#include <random>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "distributed/tcp_store/protocol.hpp"
#include "support/log_capture.hpp"

namespace {

using dpipe::TcpStore;
using dpipe::TcpStoreOptions;
using dpipe::testing::LogCapture;
using namespace std::chrono_literals;

TcpStoreOptions server_options(std::chrono::milliseconds timeout = 5000ms) {
  TcpStoreOptions options;
  options.serve = true;
  options.token = "job-1";
  options.timeout = timeout;
  return options;
}

TcpStoreOptions client_options(std::uint16_t port, std::chrono::milliseconds timeout = 5000ms) {
  TcpStoreOptions options;
  options.port = port;
  options.token = "job-1";
  options.timeout = timeout;
  return options;
}

std::vector<std::byte> bytes(std::string_view text) {
  const auto view = std::as_bytes(std::span(text));
  return {view.begin(), view.end()};
}

std::string text(const std::vector<std::byte>& value) {
  return {reinterpret_cast<const char*>(value.data()), value.size()};
}

/// A port nothing listens on right now.
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  socklen_t length = sizeof(address);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);
  return ntohs(address.sin_port);
}

/// A raw connection to the store, to send what no TcpStore would.
class RawPeer {
 public:
  explicit RawPeer(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  }
  ~RawPeer() { ::close(fd_); }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  void send(const std::vector<std::byte>& data) const {
    REQUIRE(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size()));
  }
  /// The next framed reply, decoded.
  dpipe::detail::store::Reply reply() const {
    std::uint32_t size = 0;
    read_exactly(&size, sizeof(size));
    std::vector<std::byte> body(size);
    read_exactly(body.data(), size);
    return dpipe::detail::store::decode_reply(body);
  }
  /// Whether the server closed the connection (the next read sees the end).
  [[nodiscard]] bool closed_by_server() const {
    char byte = 0;
    return ::recv(fd_, &byte, 1, 0) == 0;
  }

 private:
  void read_exactly(void* out, std::size_t size) const {
    auto* cursor = static_cast<char*>(out);
    while (size > 0) {
      const ssize_t got = ::recv(fd_, cursor, size, 0);
      REQUIRE(got > 0);
      cursor += got;
      size -= static_cast<std::size_t>(got);
    }
  }
  int fd_;
};

std::vector<std::byte> hello(std::uint32_t version, const std::string& token) {
  return dpipe::detail::store::frame(dpipe::detail::store::encode(dpipe::detail::store::Hello{version, token}));
}

TEST_CASE("TcpStore: set get add compare_set wait remove between two ranks", "[distributed][store][concurrency]") {
  TcpStore server(server_options());
  TcpStore client(client_options(server.port()));
  CHECK(server.port() != 0);
  CHECK(client.port() == server.port());

  server.set("seed", std::string_view("42"));
  CHECK(client.get_text("seed") == "42");
  client.set("seed", bytes("43"));
  CHECK(server.get_text("seed") == "43");

  CHECK(client.add("arrived", 1) == 1);
  CHECK(server.add("arrived", 1) == 2);
  CHECK(client.add("arrived", -5) == -3);
  CHECK(server.get_text("arrived") == "-3");
  server.set("name", std::string_view("rank0"));
  CHECK_THROWS_MATCHES(client.add("name", 1), dpipe::InvalidArgument,
                       Catch::Message("TcpStore: add('name', 1): the value of 'name' is not an integer"));
  CHECK(client.get_text("name") == "rank0");  // unchanged; the connection goes on

  CHECK(text(client.compare_set("leader", {}, bytes("rank1"))) == "rank1");              // absent and expected empty
  CHECK(text(server.compare_set("leader", bytes("rank0"), bytes("rank0"))) == "rank1");  // no match: unchanged
  CHECK(text(server.compare_set("leader", bytes("rank1"), bytes("rank0"))) == "rank0");

  client.wait({"seed", "arrived", "leader"});
  CHECK(client.remove("leader"));
  CHECK_FALSE(server.remove("leader"));
  std::vector<std::byte> big(1 << 20, std::byte{7});
  server.set("big", big);
  CHECK(client.get("big") == big);
}

TEST_CASE("TcpStore: get waits for another rank / a timeout / the store goes on", "[distributed][store][concurrency]") {
  TcpStore server(server_options());
  std::optional<std::string> received;
  std::thread other([port = server.port(), &received] {
    TcpStore client(client_options(port));
    client.set("ready", std::string_view("1"));
    received = client.get_text("go");  // waits until the main thread sets it
  });
  server.wait({"ready"});
  server.set("go", std::string_view("now"));
  other.join();
  CHECK(received == "now");

  TcpStore impatient(client_options(server.port(), 100ms));
  CHECK_THROWS_MATCHES(impatient.get("never"), dpipe::TimeoutError,
                       Catch::Message("TcpStore: get('never') timed out after 100 ms"));
  CHECK_THROWS_MATCHES(impatient.wait({"seed", "never"}), dpipe::TimeoutError,
                       Catch::Message("TcpStore: wait('seed', 'never') timed out after 100 ms"));
  impatient.set("after", std::string_view("timeouts"));  // reconnects
  server.set("never", std::string_view("late"));         // the abandoned waits are gone
  CHECK(impatient.get_text("after") == "timeouts");
}

TEST_CASE("TcpStore: a client that starts first connects once the server is up", "[distributed][store][concurrency]") {
  const std::uint16_t port = free_port();
  std::optional<std::string> seen;
  std::thread early([port, &seen] {
    TcpStore client(client_options(port));  // retries while nothing listens
    seen = client.get_text("hello");
  });
  TcpStoreOptions options = server_options();
  options.port = port;
  TcpStore server(options);
  server.set("hello", std::string_view("world"));
  early.join();
  CHECK(seen == "world");
}

TEST_CASE("TcpStore: ranks in separate processes", "[distributed][store]") {
  const std::uint16_t port = free_port();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 1;
    try {
      TcpStore client(client_options(port));
      client.set("child", std::to_string(::getpid()));
      status = client.get_text("parent") == "done" ? 0 : 2;
    } catch (...) {
      status = 3;
    }
    ::_exit(status);
  }
  TcpStoreOptions options = server_options();
  options.port = port;
  TcpStore server(options);
  CHECK(server.get_text("child") == std::to_string(child));
  server.set("parent", std::string_view("done"));
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("TcpStore: wrong token / version / oversized or malformed messages are refused and logged",
          "[distributed][store][concurrency]") {
  const LogCapture log;
  TcpStore server(server_options());
  const std::uint16_t port = server.port();
  const std::string where = "127.0.0.1:" + std::to_string(port);

  TcpStoreOptions stray = client_options(port, 1000ms);
  stray.token = "other-job";
  CHECK_THROWS_MATCHES(TcpStore(stray), dpipe::RendezvousError,
                       Catch::Message("TcpStore: the store refused the connection: a wrong job token (" + where + ")"));

  const auto refused = [port](const std::vector<std::byte>& sent) {
    const RawPeer peer(port);
    peer.send(sent);
    const auto reply = peer.reply();
    CHECK_FALSE(reply.ok);
    CHECK(peer.closed_by_server());
    return reply.error;
  };
  CHECK(refused(hello(99, "job-1")) == "the store refused the connection: protocol version 99, this store speaks 1");
  CHECK(refused({std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0x40}}) ==
        "the store refused the connection: a message of 1073741824 bytes exceeds the limit of 4096");
  CHECK(refused(dpipe::detail::store::frame(bytes("GET / HTTP/1.1"))) ==
        "the store refused the connection: a malformed handshake (not a dpipe store handshake)");
  {
    const RawPeer peer(port);
    peer.send(hello(TcpStore::kProtocolVersion, "job-1"));
    CHECK(peer.reply().ok);
    peer.send(dpipe::detail::store::frame({std::byte{99}}));
    const auto reply = peer.reply();
    CHECK(reply.error == "the store refused the connection: a malformed request (unknown operation 99)");
    CHECK(peer.closed_by_server());
  }
  // The server went on serving its ranks.
  TcpStore client(client_options(port));
  client.set("still", std::string_view("serving"));
  CHECK(server.get_text("still") == "serving");
  std::size_t refusals = 0;
  for (const auto& message : log.messages()) {
    if (message.rfind("TcpStore: closed the connection from 127.0.0.1:", 0) == 0) ++refusals;
  }
  CHECK(refusals == 5);
}

TEST_CASE("TcpStore: a server that goes away / one that is not there / bad options", "[distributed][store]") {
  auto server = std::make_unique<TcpStore>(server_options());
  const std::uint16_t port = server->port();
  TcpStore client(client_options(port, 300ms));
  client.set("before", std::string_view("1"));
  server.reset();
  CHECK_THROWS_AS(client.get("before"), dpipe::RendezvousError);  // the connection failed
  CHECK_THROWS_WITH(
      client.get("before"),
      Catch::StartsWith("TcpStore: cannot reach the store at 127.0.0.1:" + std::to_string(port) + " within 300 ms"));
  CHECK_THROWS_WITH(TcpStore(client_options(free_port(), 200ms)),
                    Catch::StartsWith("TcpStore: cannot reach the store"));

  TcpStoreOptions no_port;
  CHECK_THROWS_MATCHES(TcpStore(no_port), dpipe::InvalidArgument,
                       Catch::Message("TcpStore: a client needs the store's port"));
  TcpStore first(server_options());
  TcpStoreOptions same_port = server_options();
  same_port.port = first.port();
  CHECK_THROWS_WITH(TcpStore(same_port),
                    Catch::StartsWith("TcpStore: cannot serve on 127.0.0.1:" + std::to_string(first.port()) + ": "));
  TcpStoreOptions nowhere = client_options(1);
  nowhere.host = "no-such-host.invalid";
  CHECK_THROWS_WITH(TcpStore(nowhere), Catch::StartsWith("TcpStore: the host 'no-such-host.invalid' does not resolve"));
}

TEST_CASE("PrefixStore: two loaders' keys never collide", "[distributed][store]") {
  auto store = std::make_shared<TcpStore>(server_options());
  dpipe::PrefixStore first(store, "loader1/");
  dpipe::PrefixStore second(store, "loader2/");
  first.set("seed", std::string_view("1"));
  second.set("seed", std::string_view("2"));
  CHECK(first.get_text("seed") == "1");
  CHECK(second.get_text("seed") == "2");
  CHECK(store->get_text("loader1/seed") == "1");
  CHECK(first.add("count", 3) == 3);
  first.wait({"seed", "count"});
  CHECK(text(second.compare_set("leader", {}, bytes("me"))) == "me");
  CHECK(second.remove("seed"));
  CHECK(first.get_text("seed") == "1");
  CHECK(first.timeout() == store->timeout());
  CHECK_THROWS_MATCHES(dpipe::PrefixStore(nullptr, "x/"), dpipe::InvalidArgument,
                       Catch::Message("PrefixStore: the store is null"));
}

TEST_CASE("TcpStore: the decoders take any bytes without reading out of bounds", "[distributed][store][fuzz]") {
  namespace store = dpipe::detail::store;
  std::vector<std::vector<std::byte>> valid = {
      store::encode(store::Hello{1, "job-1"}),
      store::encode(store::Request{.op = store::Op::kCompareSet,
                                   .key = "k",
                                   .value = bytes("a"),
                                   .desired = bytes("b"),
                                   .delta = 0,
                                   .keys = {}}),
      store::encode(store::Request{
          .op = store::Op::kWait, .key = {}, .value = {}, .desired = {}, .delta = 0, .keys = {"a", "b"}}),
      store::encode(store::Reply{.ok = false, .body = {}, .error = "no"}),
  };
  std::mt19937 random(20261124);
  std::size_t decoded = 0;
  for (int round = 0; round < 20000; ++round) {
    auto input = valid[static_cast<std::size_t>(round) % valid.size()];
    if (round % 3 == 0) input.resize(random() % (input.size() + 1));  // truncated
    for (int flips = static_cast<int>(random() % 4); flips > 0 && !input.empty(); --flips) {
      input[random() % input.size()] = static_cast<std::byte>(random());
    }
    if (round % 5 == 0) {
      input.resize(random() % 64);
      for (auto& byte : input) byte = static_cast<std::byte>(random());
    }
    for (const auto decode : {+[](std::span<const std::byte> b) { (void)store::decode_hello(b); },
                              +[](std::span<const std::byte> b) { (void)store::decode_request(b); },
                              +[](std::span<const std::byte> b) { (void)store::decode_reply(b); }}) {
      try {
        decode(input);
        ++decoded;
      } catch (const dpipe::SerializationError&) {
      }
    }
  }
  CHECK(decoded > 0);  // the unchanged messages among the inputs decode
}

}  // namespace

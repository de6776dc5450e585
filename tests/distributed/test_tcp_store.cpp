// TcpStore over real sockets on loopback: every operation, waiting and timeouts, a client that
// starts before the server, another process, refused connections, a server that goes away, and a
// fuzz test of the message decoders.

#include <arpa/inet.h>
#include <array>
#include <chrono>
#include <csignal>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
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
#include "reading_service/distributed/rank_group.hpp"
#include "support/free_port.hpp"
#include "support/log_capture.hpp"
#include "support/memory_store.hpp"
#include "support/raw_peer.hpp"

namespace {

using dpipe::TcpStore;
using dpipe::TcpStoreOptions;
using dpipe::testing::free_port;
using dpipe::testing::hello;
using dpipe::testing::LogCapture;
using dpipe::testing::RawPeer;
using namespace std::chrono_literals;

TcpStoreOptions server_options(std::chrono::milliseconds timeout = 5000ms) {
  TcpStoreOptions options;
  options.serve = true;
  options.token = "job-1";
  options.timeout = timeout;
  return options;
}

/// A server's options on a port chosen beforehand, which a second server takes over.
TcpStoreOptions server_options_on(std::uint16_t port) {
  TcpStoreOptions options = server_options();
  options.port = port;
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
  CHECK(refused(hello(99, "job-1")) == "the store refused the connection: protocol version 99, this store speaks 3");
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
  store::Request compare_set;
  compare_set.op = store::Op::kCompareSet;
  compare_set.key = "k";
  compare_set.value = bytes("a");
  compare_set.desired = bytes("b");
  store::Request wait;
  wait.op = store::Op::kWait;
  wait.keys = {"a", "b"};
  store::Request gather;
  gather.op = store::Op::kExchange;
  gather.key = "loader0/fullsync0/1/2";
  gather.value = bytes("progress");
  gather.collect = "loader0/fullsync0/1/1";
  gather.rank = 1;
  gather.world_size = 2;
  gather.timeout_ms = 500;
  store::Request leave;
  leave.op = store::Op::kLeave;
  store::Request watch;
  watch.op = store::Op::kWatch;
  watch.key = "loader0/";
  watch.rank = 1;
  store::Reply refused;
  refused.ok = false;
  refused.failure = store::Failure::kTimeout;
  refused.error = "no";
  const std::vector<std::vector<std::byte>> valid = {
      store::encode(store::Hello{TcpStore::kProtocolVersion, "job-1", std::nullopt}),
      store::encode(store::Hello{TcpStore::kProtocolVersion, "job-1", store::Member{"loader0/", 1, 2, "f"}}),
      store::encode(watch),
      store::encode(compare_set),
      store::encode(wait),
      store::encode(gather),
      store::encode(leave),
      store::encode(refused),
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

namespace {

/// The store options of `rank` of member `member`, connecting to `port`.
TcpStoreOptions rank_options(std::uint16_t port, std::size_t rank, std::chrono::milliseconds timeout = 5000ms) {
  TcpStoreOptions options = client_options(port, timeout);
  options.rank = rank;
  options.member = "loader0/";
  return options;
}

/// Rank 0's server on `port`, serving the store of its loader "loader0/".
TcpStoreOptions loader0_server_options(std::uint16_t port) {
  TcpStoreOptions options = server_options_on(port);
  options.rank = 0;
  options.member = "loader0/";
  return options;
}

/// Forks a process that connects as rank `rank` of "loader0/", sets "connected" and kills itself
/// (its connection closes without leaving); returns its pid.
pid_t fork_dying_rank(std::uint16_t port, std::size_t rank) {
  const pid_t child = ::fork();
  if (child != 0) return child;
  try {
    TcpStore dying(rank_options(port, rank));
    dying.set("connected", std::string_view("yes"));
    ::raise(SIGKILL);
  } catch (...) {
  }
  ::_exit(3);
}

std::vector<std::string> texts(const std::vector<std::vector<std::byte>>& values) {
  std::vector<std::string> out;
  for (const auto& value : values) out.push_back(text(value));
  return out;
}

}  // namespace

TEST_CASE("TcpStore: all_gather gives every rank every value in rank order", "[distributed][store][concurrency]") {
  TcpStoreOptions options = server_options();
  options.rank = 0;
  options.member = "loader0/";
  TcpStore rank0(options);
  std::vector<std::vector<std::string>> seen(3);
  std::vector<std::thread> others;
  for (std::size_t rank = 1; rank < 3; ++rank) {
    others.emplace_back([&, rank] {
      TcpStore store(rank_options(rank0.port(), rank));
      for (int round = 0; round < 50; ++round) {
        const std::string value = "r" + std::to_string(rank) + "/" + std::to_string(round);
        const auto values = store.all_gather("loader0/round/" + std::to_string(round), rank, 3, bytes(value));
        if (round == 49) seen[rank] = texts(values);
      }
    });
  }
  for (int round = 0; round < 50; ++round) {
    const auto values = rank0.all_gather("loader0/round/" + std::to_string(round), 0, 3, bytes("r0/" + std::to_string(round)));
    if (round == 49) seen[0] = texts(values);
  }
  for (auto& other : others) other.join();
  const std::vector<std::string> expected{"r0/49", "r1/49", "r2/49"};
  CHECK(seen == std::vector<std::vector<std::string>>{expected, expected, expected});
  // A completed round is forgotten: the same name starts a new round.
  CHECK(rank0.all_gather("loader0/again", 0, 1, bytes("x")) == std::vector<std::vector<std::byte>>{bytes("x")});
  CHECK(rank0.all_gather("loader0/again", 0, 1, bytes("y")) == std::vector<std::vector<std::byte>>{bytes("y")});
}

TEST_CASE("TcpStore: all_gather names the ranks that did not arrive / left / and refuses nonsense",
          "[distributed][store][concurrency]") {
  TcpStoreOptions options = server_options(300ms);
  options.rank = 0;
  options.member = "loader0/";
  TcpStore rank0(options);
  SECTION("a timeout") {
    CHECK_THROWS_MATCHES(rank0.all_gather("loader0/seed/0", 0, 3, bytes("s")), dpipe::TimeoutError,
                         Catch::Message("TcpStore: all_gather('loader0/seed/0', rank 0 of 3): ranks 1, 2 did not arrive "
                                        "within 300 ms"));
  }
  SECTION("a rank that leaves on purpose, before and after the others arrive") {
    TcpStore rank1(rank_options(rank0.port(), 1));
    std::thread waiting([&] {
      CHECK_THROWS_MATCHES(rank0.all_gather("loader0/fullsync0/1/0", 0, 2, bytes("p")), dpipe::RendezvousError,
                           Catch::Message("TcpStore: all_gather('loader0/fullsync0/1/0', rank 0 of 2): rank 1 is gone: "
                                          "it shut its loader down"));
    });
    rank1.leave();
    waiting.join();
    CHECK_THROWS_MATCHES(rank0.all_gather("loader0/fullsync0/1/1", 0, 2, bytes("p")), dpipe::RendezvousError,
                         Catch::Message("TcpStore: all_gather('loader0/fullsync0/1/1', rank 0 of 2): rank 1 is gone: "
                                        "it shut its loader down"));
    // Another member's rounds are not its business.
    CHECK(rank0.all_gather("loader1/seed/0", 0, 1, bytes("s")).size() == 1);
  }
  SECTION("a rank whose process dies") {
    const pid_t child = fork_dying_rank(rank0.port(), 1);
    REQUIRE(child >= 0);
    CHECK(rank0.get_text("connected") == "yes");
    CHECK_THROWS_MATCHES(rank0.all_gather("loader0/fullsync0/1/0", 0, 2, bytes("p")), dpipe::RendezvousError,
                         Catch::Message("TcpStore: all_gather('loader0/fullsync0/1/0', rank 0 of 2): rank 1 is gone: "
                                        "its connection to the store closed (the process ended or was killed)"));
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
  }
  SECTION("a rank that posts without waiting / posts ahead and collects later") {
    TcpStore rank1(rank_options(rank0.port(), 1));
    CHECK(rank1.exchange("loader0/fullsync0/1/0", bytes("failed"), "", 1, 2).empty());
    CHECK(texts(rank0.all_gather("loader0/fullsync0/1/0", 0, 2, bytes("ok"))) ==
          std::vector<std::string>{"ok", "failed"});
    // Pipelined: each rank posts round k + 1 in the request that collects round k.
    CHECK(rank0.exchange("loader0/p/0", bytes("a0"), "", 0, 2).empty());
    CHECK(rank1.exchange("loader0/p/0", bytes("b0"), "", 1, 2).empty());
    CHECK(texts(rank0.exchange("loader0/p/1", bytes("a1"), "loader0/p/0", 0, 2)) == std::vector<std::string>{"a0", "b0"});
    CHECK(texts(rank1.exchange("loader0/p/1", bytes("b1"), "loader0/p/0", 1, 2)) == std::vector<std::string>{"a0", "b0"});
    CHECK(texts(rank1.exchange("", {}, "loader0/p/1", 1, 2)) == std::vector<std::string>{"a1", "b1"});
    CHECK(texts(rank0.exchange("", {}, "loader0/p/1", 0, 2)) == std::vector<std::string>{"a1", "b1"});
  }
  SECTION("nonsense") {
    CHECK_THROWS_MATCHES(rank0.all_gather("loader0/x", 2, 2, bytes("v")), dpipe::InvalidArgument,
                         Catch::Message("TcpStore: all_gather('loader0/x', rank 2 of 2): rank 2 is outside a world of 2"));
    TcpStore rank1(rank_options(rank0.port(), 1));
    CHECK(rank1.exchange("loader0/y", bytes("v"), "", 1, 2).empty());
    CHECK_THROWS_MATCHES(rank0.all_gather("loader0/y", 0, 3, bytes("v")), dpipe::InvalidArgument,
                         Catch::Message("TcpStore: all_gather('loader0/y', rank 0 of 3): rank 0 says the world has 3 "
                                        "ranks, an earlier rank said 2"));
    // The same post again (a re-post after a server closed) changes nothing; another value is an error.
    CHECK(rank1.exchange("loader0/y", bytes("v"), "", 1, 2).empty());
    CHECK_THROWS_MATCHES(rank1.exchange("loader0/y", bytes("w"), "", 1, 2), dpipe::InvalidArgument,
                         Catch::Message("TcpStore: post('loader0/y', rank 1 of 2): rank 1 arrived twice, with "
                                        "another value"));
  }
}

TEST_CASE("TcpStore: a server that closes on purpose is asked again once the next one is up",
          "[distributed][store][concurrency]") {
  const std::uint16_t port = free_port();
  const TcpStoreOptions options = server_options_on(port);
  auto first = std::make_unique<TcpStore>(options);
  TcpStore client(client_options(port));
  std::vector<std::string> values;
  SECTION("a round waiting on it") {
    client.set("on the first", std::string_view("1"));
    std::thread waiting([&] { values = texts(client.all_gather("next/round", 1, 2, bytes("client"))); });
    first.reset();  // the client's round was asked of it: it asks again, of the next server
    TcpStore second(options);
    CHECK(texts(second.all_gather("next/round", 0, 2, bytes("server"))) ==
          std::vector<std::string>{"server", "client"});
    waiting.join();
    CHECK(values == std::vector<std::string>{"server", "client"});
  }
  // A rank restored from a checkpoint posts its last counts without collecting them, to the
  // server rank 0's previous loader still holds; that server closes when the loader goes, and
  // rank 0's next loader serves a new one, which must have them.
  SECTION("what the client posted to it without collecting") {
    CHECK(client.exchange("next/0", bytes("c0"), "", 1, 2).empty());
    CHECK(client.exchange("next/1", bytes("c1"), "", 1, 2).empty());
    std::thread waiting([&] { values = texts(client.exchange("next/2", bytes("c2"), "next/1", 1, 2)); });
    first.reset();
    TcpStore second(options);
    CHECK(second.exchange("next/0", bytes("s0"), "", 0, 2).empty());
    CHECK(texts(second.exchange("next/1", bytes("s1"), "next/0", 0, 2)) == std::vector<std::string>{"s0", "c0"});
    CHECK(texts(second.exchange("next/2", bytes("s2"), "next/1", 0, 2)) == std::vector<std::string>{"s1", "c1"});
    CHECK(texts(second.exchange("", {}, "next/2", 0, 2)) == std::vector<std::string>{"s2", "c2"});
    waiting.join();
    CHECK(values == std::vector<std::string>{"s1", "c1"});
    CHECK(texts(client.exchange("", {}, "next/0", 1, 2)) == std::vector<std::string>{"s0", "c0"});
    CHECK(texts(client.exchange("", {}, "next/2", 1, 2)) == std::vector<std::string>{"s2", "c2"});
  }
}

// A worker process forked while rank 0's store runs holds a copy of its listening socket (a
// loader restored in place forks its workers before the old loader's store closes).
TEST_CASE("TcpStore: a closed server leaves its port to the next one though a forked child holds its socket",
          "[distributed][store]") {
  const std::uint16_t port = free_port();
  const TcpStoreOptions options = server_options_on(port);
  auto first = std::make_unique<TcpStore>(options);
  std::array<int, 2> hold{};
  REQUIRE(::pipe(hold.data()) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // a worker holding the parent's descriptors until the parent lets it go
    ::close(hold[1]);
    char byte = 0;
    (void)!::read(hold[0], &byte, 1);
    ::_exit(0);
  }
  ::close(hold[0]);
  first.reset();
  TcpStore second(options);
  TcpStore client(client_options(port));
  client.set("key", std::string_view("value"));
  CHECK(second.get_text("key") == "value");
  ::close(hold[1]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
}

// A rank restored from a checkpoint may come while rank 0's process still serves its previous
// loader's store; if it died there, rank 0's next store would never hear of it.
TEST_CASE("TcpStore: a rank of rank 0's next loader waits for the store that loader serves",
          "[distributed][store][concurrency]") {
  const std::uint16_t port = free_port();
  const TcpStoreOptions old_loader = loader0_server_options(port);
  auto first = std::make_unique<TcpStore>(old_loader);
  TcpStoreOptions next_loader = old_loader;
  next_loader.member = "loader1/";
  SECTION("refused until then") {
    TcpStoreOptions early = rank_options(port, 1, 300ms);
    early.member = "loader1/";
    CHECK_THROWS_MATCHES(TcpStore(early), dpipe::RendezvousError,
                         Catch::Message("TcpStore: cannot reach the store at 127.0.0.1:" + std::to_string(port) +
                                        " within 300 ms (the store serves rank 0's loaders loader0/, not loader1/ "
                                        "yet, and no store came back)"));
    // The ranks of its own loader, and clients that are nobody in particular, are served.
    TcpStore own(rank_options(port, 1));
    TcpStore anybody(client_options(port));
    anybody.set("key", std::string_view("value"));
    // Once rank 0's next loader shares this server, so are that loader's ranks.
    TcpStore next(next_loader);
    TcpStoreOptions now = rank_options(port, 1);
    now.member = "loader1/";
    TcpStore rank1(now);
    CHECK(rank1.get_text("key") == "value");
  }
  SECTION("a rank that dies at once is heard of by the next store") {
    std::thread dying([&] {
      TcpStoreOptions options = rank_options(port, 1);
      options.member = "loader1/";
      const TcpStore rank1(options);
    });  // its connection closes without leaving, as when its process is killed
    first.reset();
    next_loader.serve = true;
    TcpStore second(next_loader);
    CHECK_THROWS_MATCHES(second.all_gather("loader1/seed/0", 0, 2, bytes("s")), dpipe::RendezvousError,
                         Catch::Message("TcpStore: all_gather('loader1/seed/0', rank 0 of 2): rank 1 is gone: its "
                                        "connection to the store closed (the process ended or was killed)"));
    dying.join();
  }
}

TEST_CASE("RankGroup: a failing rank's notice waits its patience and not the loader's timeout for a refusing store",
          "[distributed][store][concurrency]") {
  // Rank 0 still serves its previous loader (loader0/): the store refuses loader1/'s rank 1 until
  // rank 0's loader1/ greets it. A rank 1 that fails now leaves its notice if it can, and goes on
  // failing within its patience (2 s) instead of waiting the hour its loader may wait.
  const std::uint16_t port = free_port();
  const TcpStore first(loader0_server_options(port));
  dpipe::LaunchEnvironment environment;
  environment.rank = 1;
  environment.world_size = 2;
  environment.store_host = "127.0.0.1";
  environment.store_port = port;
  environment.token = "job-1";
  dpipe::DistributedOptions options;
  options.timeout = std::chrono::hours(1);
  const auto group = std::make_shared<dpipe::detail::dist::RankGroup>(environment, options, "loader1/",
                                                                      dpipe::detail::dist::RunIdentity{});
  const auto start = std::chrono::steady_clock::now();
  group->post("fullsync0/0/0", bytes("failed"));
  // Not a timing target: a post that waited for the loader's hour would never get here.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::minutes(1));
  // The store never took the notice: it still refuses loader1/'s ranks.
  TcpStoreOptions early = rank_options(port, 1, 100ms);
  early.member = "loader1/";
  CHECK_THROWS_MATCHES(TcpStore(early), dpipe::RendezvousError,
                       Catch::Message("TcpStore: cannot reach the store at 127.0.0.1:" + std::to_string(port) +
                                      " within 100 ms (the store serves rank 0's loaders loader0/, not loader1/ "
                                      "yet, and no store came back)"));
}

TEST_CASE("Store: the default all_gather of a store of your own", "[distributed][store][concurrency]") {
  auto store = std::make_shared<dpipe::testing::MemoryStore>();
  dpipe::PrefixStore view(store, "dpipe/");
  std::vector<std::string> seen;
  std::thread rank1([&] { seen = texts(view.all_gather("round", 1, 2, bytes("b"))); });
  CHECK(texts(view.all_gather("round", 0, 2, bytes("a"))) == std::vector<std::string>{"a", "b"});
  rank1.join();
  CHECK(seen == std::vector<std::string>{"a", "b"});
  CHECK(store->get_text("dpipe/round/0") == "a");  // the default keeps its keys
  CHECK_THROWS_MATCHES(view.all_gather("round", 2, 2, bytes("c")), dpipe::InvalidArgument,
                       Catch::Message("Store::exchange('dpipe/round', 'dpipe/round'): rank 2 is outside a world of 2"));
}

TEST_CASE("TcpStore: a live server takes random frames and goes on serving", "[distributed][store][fuzz]") {
  TcpStore server(server_options());
  std::mt19937 random(20261125);
  for (int peer = 0; peer < 200; ++peer) {
    const RawPeer raw(server.port());
    if (peer % 2 == 0) {
      raw.send(hello(TcpStore::kProtocolVersion, "job-1"));
      CHECK(raw.reply().ok);
    }
    std::vector<std::byte> frame(4 + random() % 64);
    const auto size = static_cast<std::uint32_t>(peer % 7 == 0 ? random() : frame.size() - 4);
    std::memcpy(frame.data(), &size, sizeof(size));
    for (std::size_t i = 4; i < frame.size(); ++i) frame[i] = static_cast<std::byte>(random());
    raw.send(frame);
  }
  TcpStore client(client_options(server.port()));
  client.set("after", std::string_view("fuzz"));
  CHECK(server.get_text("after") == "fuzz");
}

TEST_CASE("TcpStore: a rank of another world or fingerprint or a seat taken is refused at once naming both",
          "[distributed][store]") {
  TcpStoreOptions options = server_options();
  options.rank = 0;
  options.member = "loader0/";
  options.world_size = 2;
  options.fingerprint = "aa";
  const TcpStore rank0(options);
  TcpStoreOptions own = rank_options(rank0.port(), 1);
  own.world_size = 2;
  own.fingerprint = "aa";
  const TcpStore rank1(own);
  const std::string where = " (127.0.0.1:" + std::to_string(rank0.port()) + ")";
  const std::string hint = "another job on this port? (give each job its own DPIPE_STORE_PORT or DPIPE_STORE_TOKEN)";
  TcpStoreOptions other = own;
  other.world_size = 3;
  other.fingerprint = "bb";
  CHECK_THROWS_MATCHES(TcpStore(other), dpipe::RendezvousError,
                       Catch::Message("TcpStore: the store refused the connection: rank 1 of loader 'loader0/' runs a "
                                      "world of 3 ranks with the fingerprint bb, but rank 0 of it a world of 2 ranks "
                                      "with the fingerprint aa: " +
                                      hint + where));
  CHECK_THROWS_WITH(TcpStore(own),
                    Catch::StartsWith("TcpStore: the store refused the connection: rank 1 of loader 'loader0/' is "
                                      "connected already (from 127.0.0.1:") &&
                        Catch::EndsWith("): " + hint + where));
}

TEST_CASE("TcpStore: a wait logs who is missing every stall_warning", "[distributed][store][concurrency]") {
  std::promise<void> warned;
  std::once_flag once;
  const LogCapture log([&](const std::string& message) {
    if (message.find("has not arrived") != std::string::npos) std::call_once(once, [&] { warned.set_value(); });
  });
  SECTION("for a rank of the round") {
    TcpStoreOptions options = server_options();
    options.rank = 0;
    options.member = "loader0/";
    options.stall_warning = 100ms;
    TcpStore rank0(options);
    std::thread late([&] {
      // Rank 0 logged that rank 1 is missing: now it comes (the bound only guards against a hang).
      (void)warned.get_future().wait_for(std::chrono::seconds(60));
      TcpStore rank1(rank_options(rank0.port(), 1));
      (void)rank1.all_gather("loader0/seed/0", 1, 2, bytes("b"));
    });
    CHECK(texts(rank0.all_gather("loader0/seed/0", 0, 2, bytes("a"))) == std::vector<std::string>{"a", "b"});
    late.join();
    const auto messages = log.messages();
    REQUIRE(!messages.empty());
    CHECK_THAT(messages.front(), Catch::Matches("TcpStore: all_gather\\('loader0/seed/0', rank 0 of 2\\): rank 1 has "
                                                "not arrived after [0-9]+\\.[0-9] s; still waiting \\(up to the "
                                                "timeout of 5000 ms\\)"));
  }
  SECTION("for the store to come up") {
    const std::uint16_t port = free_port();
    TcpStoreOptions options = client_options(port, 400ms);
    options.stall_warning = 100ms;
    CHECK_THROWS_AS(TcpStore(options), dpipe::RendezvousError);
    const auto messages = log.messages();
    REQUIRE(!messages.empty());
    CHECK_THAT(messages.front(), Catch::Matches("TcpStore: no store at 127\\.0\\.0\\.1:" + std::to_string(port) +
                                                " after [0-9]+\\.[0-9] s \\(.+\\): rank 0 serves it; still trying "
                                                "\\(up to the timeout of 400 ms\\)"));
  }
}

TEST_CASE("TcpStore: a rank hears at once that another rank of its loader died in no round",
          "[distributed][store][concurrency]") {
  // World of 3: rank 1 leaves on purpose (no news), then rank 2's process dies: rank 0, which
  // waits in no round, hears of rank 2.
  std::promise<std::string> heard;
  TcpStoreOptions options = server_options();
  options.rank = 0;
  options.member = "loader0/";
  options.on_departure = [&](const std::string& why) { heard.set_value(why); };
  TcpStore rank0(options);
  TcpStore rank1(rank_options(rank0.port(), 1));
  rank1.leave();
  const pid_t child = fork_dying_rank(rank0.port(), 2);
  REQUIRE(child >= 0);
  auto future = heard.get_future();
  REQUIRE(future.wait_for(std::chrono::seconds(60)) == std::future_status::ready);  // a hang guard, not a target
  CHECK(future.get() == "rank 2 is gone: its connection to the store closed (the process ended or was killed)");
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
}

// read_from_http: bodies streamed from a local test server (tests/support/http_server.hpp), the
// standard battery through readlines, restores that ask for the rest of a body with a Range
// request, error statuses, retries, bodies cut short, a stalled server, max_bytes, the skip
// policy, and worker processes and threads reading sharded URLs.

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/battery.hpp"
#include "support/http_server.hpp"
#include "support/io_workers.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"

namespace {

using dpipe::DataError;
using dpipe::io::HttpOptions;
using dpipe::io::PathLine;
using dpipe::testing::HttpServer;
using namespace std::chrono_literals;

/// Options that give up fast: no retry waits longer than a millisecond.
HttpOptions quick(HttpOptions options = {}) {
  options.retry_delay = 1ms;
  return options;
}

/// Every byte of `file`, read in reads of `block` bytes.
std::string read_all(dpipe::io::OpenedFile& file, std::size_t block) {
  std::string bytes;
  std::vector<char> buffer(block);
  while (const std::size_t got = file.read(buffer.data(), buffer.size(), "test")) bytes.append(buffer.data(), got);
  return bytes;
}

/// 5 MiB of bytes that repeat only every 251 bytes.
std::string big_body() {
  std::string body(std::size_t{5} << 20, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('!' + i % 251 % 90);
  return body;
}

/// The first byte each request for `path` asked for (std::nullopt: the whole body).
std::vector<std::optional<std::uint64_t>> ranges_asked(const HttpServer& server, const std::string& path) {
  std::vector<std::optional<std::uint64_t>> starts;
  for (const auto& request : server.log())
    if (request.path == path) starts.push_back(request.range_start);
  return starts;
}

/// Serves `files` bodies at "/part-<file>.txt", each of `lines` lines `line(file, index)`; appends
/// every line to `expected` and returns the URLs.
template <class Line>
std::vector<std::string> serve_parts(HttpServer& server, int files, int lines, std::vector<std::string>& expected,
                                     const Line& line) {
  std::vector<std::string> urls;
  for (int file = 0; file < files; ++file) {
    std::string text;
    for (int index = 0; index < lines; ++index) {
      expected.push_back(line(file, index));
      text += expected.back() + "\n";
    }
    const std::string path = "/part-" + std::to_string(file) + ".txt";
    server.serve(path, text);
    urls.push_back(server.url(path));
  }
  return urls;
}

/// What a fresh graph from `make()` yields once restored from a checkpoint another took after
/// `count` elements.
template <class Make>
auto restored_after(const Make& make, std::size_t count) {
  const auto pipe = make();
  (void)dpipe::testing::take(pipe, count);
  const auto blob = dpipe::graph::save_state(pipe);
  const auto restored = make();
  dpipe::graph::load_state(restored, blob);
  return dpipe::testing::collect(restored);
}

}  // namespace

TEST_CASE("read_from_http yields each body byte for byte", "[io][http]") {
  HttpServer server;
  const std::string big = big_body();
  server.serve("/small.txt", "hello\nworld\n");
  server.serve("/empty", "");
  server.serve("/big.bin", big);
  server.chunked("/chunked.bin");
  server.serve("/chunked.bin", big.substr(0, 300000));
  const std::vector<std::string> urls{server.url("/small.txt"), server.url("/empty"), server.url("/big.bin"),
                                      server.url("/chunked.bin")};
  for (const std::size_t block : {std::size_t{1000}, std::size_t{64} << 10}) {
    INFO("reads of " << block << " bytes");
    auto files = dpipe::testing::collect(dpipe::iter::from(urls) | dpipe::io::read_from_http());
    REQUIRE(files.size() == 4);
    CHECK(files[0].path() == urls[0]);
    CHECK(files[0].origin().starts_with("http[length=12,"));
    CHECK(files[0].origin().ends_with("]:" + urls[0]));
    CHECK(read_all(files[0], block) == "hello\nworld\n");
    CHECK(read_all(files[1], block).empty());
    CHECK(read_all(files[2], block) == big);
    CHECK(files[2].offset() == big.size());
    CHECK(files[3].origin().starts_with("http[length=-,"));
    CHECK(read_all(files[3], block) == big.substr(0, 300000));
  }
  CHECK(server.requests("/big.bin") == 2);
}

TEST_CASE("read_from_http then readlines runs the standard battery over two URLs", "[io][http]") {
  HttpServer server;
  std::vector<std::string> expected;
  // Lines of up to 100 KiB: longer than readlines' blocks and libcurl's chunks.
  const auto urls = serve_parts(server, 2, 4, expected, [](int file, int line) {
    return std::to_string(file) + ":" + std::string(static_cast<std::size_t>(line) * 33000, 'x');
  });
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(urls) | dpipe::io::read_from_http() | dpipe::io::readlines({}, dpipe::io::lines_only);
      },
      expected, std::nullopt);
}

TEST_CASE("read_from_http restores inside a body with a Range request and nothing before it", "[io][http]") {
  HttpServer server;
  server.serve("/a.txt", "a1\na2\na3\n");
  server.serve("/b.txt", "b1\nb2\nb3\nb4\n");
  const std::vector<std::string> urls{server.url("/a.txt"), server.url("/b.txt")};
  const auto make = [&] { return dpipe::iter::from(urls) | dpipe::io::read_from_http() | dpipe::io::readlines(); };
  const auto pipe = make();
  (void)dpipe::testing::take(pipe, 5);  // a.txt and the first two lines of b.txt
  const auto blob = dpipe::graph::save_state(pipe);
  const std::vector<PathLine> rest{{urls[1], "b3"}, {urls[1], "b4"}};

  SECTION("a server that answers Range sends only the bytes after the offset") {
    server.clear_log();
    const auto restored = make();
    dpipe::graph::load_state(restored, blob);
    CHECK(dpipe::testing::collect(restored) == rest);
    CHECK(server.requests("/a.txt") == 0);
    CHECK(ranges_asked(server, "/b.txt") == std::vector<std::optional<std::uint64_t>>{6});
  }
  SECTION("a server that ignores Range sends the whole body and the reader skips to the offset") {
    server.ranges(false);
    const auto restored = make();
    dpipe::graph::load_state(restored, blob);
    CHECK(dpipe::testing::collect(restored) == rest);
  }
  SECTION("a body whose length changed is refused") {
    server.serve("/b.txt", "b1\nb2\nb3\n");
    try {
      dpipe::graph::load_state(make(), blob);
      FAIL("no StateError");
    } catch (const dpipe::StateError& error) {
      CHECK_THAT(
          error.what(),
          Catch::Matches("readlines#[0-9]+: cannot continue the file the checkpoint was reading: readlines#[0-9]+: '" +
                         urls[1] +
                         "' byte offset 6: the body has 9 bytes, it had 12 before \\(it changed since the "
                         "checkpoint\\)"));
    }
  }
  SECTION("a server that refuses the URL now is refused") {
    server.fail("/b.txt", 403);
    CHECK_THROWS_WITH(dpipe::graph::load_state(make(), blob),
                      Catch::Matches(".*: '" + urls[1] + "' byte offset 6: HTTP status 403"));
  }
}

TEST_CASE("open_files opens http URLs through the http opener", "[io][http][opener]") {
  HttpServer server;
  std::vector<std::string> expected;
  const auto urls = serve_parts(server, 2, 3, expected,
                                [](int file, int line) { return std::to_string(file) + "." + std::to_string(line); });
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(urls) | dpipe::io::open_files() | dpipe::io::readlines({}, dpipe::io::lines_only);
      },
      expected, std::nullopt);
  auto file = dpipe::io::OpenedFile::open(urls[0]);
  CHECK(file.origin() ==
        "http[length=12,max_bytes=0,connect_timeout_ms=30000,timeout_ms=60000,retries=3,retry_delay_ms=200]:" +
            urls[0]);

  SECTION("an origin as a checkpoint saved it reopens with a Range request") {
    server.clear_log();
    const std::string saved =
        "http[length=12,max_bytes=0,connect_timeout_ms=1000,timeout_ms=1000,retries=0,retry_delay_ms=1,"
        "header=9:X-Test: 1]:" +
        urls[1];
    auto reopened = dpipe::io::OpenedFile::reopen(saved, 8, "test");
    CHECK(reopened.path() == urls[1]);
    CHECK(reopened.origin() == saved);
    CHECK(read_all(reopened, 64) == "1.2\n");
    CHECK(ranges_asked(server, "/part-1.txt") == std::vector<std::optional<std::uint64_t>>{8});
  }
}

TEST_CASE("read_from_http sends the extra headers again at a restore", "[io][http]") {
  HttpServer server;
  server.serve("/a.txt", "1\n2\n3\n");
  const auto make = [&] {
    return dpipe::iter::from(std::vector<std::string>{server.url("/a.txt")}) |
           dpipe::io::read_from_http({.headers = {"X-Token: s3cr]:t", "Accept: text/plain"}}) |
           dpipe::io::readlines({}, dpipe::io::lines_only);
  };
  CHECK(restored_after(make, 1) == std::vector<std::string>{"2", "3"});
  const auto log = server.log();
  REQUIRE(log.size() == 2);
  for (const auto& request : log) {
    CHECK_THAT(request.head, Catch::Contains("\r\nX-Token: s3cr]:t\r\n"));
    CHECK_THAT(request.head, Catch::Contains("\r\nAccept: text/plain\r\n"));
  }
  const auto settings = dpipe::io::HttpReader(dpipe::iter::from(std::vector<std::string>{}),
                                              {.headers = {"X-Token: s3cr]:t", "Accept: text/plain"}})
                            .settings();
  CHECK(settings.back() == std::pair<std::string, std::string>{"headers", "X-Token Accept"});
}

TEST_CASE("read_from_http raises DataError naming the URL and the status", "[io][http]") {
  HttpServer server;
  const std::string url = server.url("/missing.txt");
  try {
    (void)dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{url}) |
                                  dpipe::io::read_from_http(quick()));
    FAIL("no DataError");
  } catch (const DataError& error) {
    CHECK_THAT(error.what(), Catch::Matches("read_from_http#[0-9]+: '" + url + "': HTTP status 404"));
    CHECK(error.path() == url);
  }
  CHECK(server.requests("/missing.txt") == 1);  // a 4xx is never retried
  CHECK_THROWS_WITH(dpipe::iter::from(std::vector<std::string>{url}) | dpipe::io::read_from_http({.timeout = -1ms}),
                    "read_from_http: connect_timeout, timeout and retry_delay must not be negative");
}

TEST_CASE("read_from_http retries 5xx and 429 with backoff and then succeeds", "[io][http]") {
  HttpServer server;
  server.serve("/flaky.txt", "ok\n");
  server.fail("/flaky.txt", 500, 2);
  server.serve("/busy.txt", "fine\n");
  server.fail("/busy.txt", 429, 3);
  const auto pipe = dpipe::iter::from(std::vector<std::string>{server.url("/flaky.txt"), server.url("/busy.txt")}) |
                    dpipe::io::read_from_http(quick()) | dpipe::io::readlines({}, dpipe::io::lines_only);
  CHECK(dpipe::testing::collect(pipe) == std::vector<std::string>{"ok", "fine"});
  CHECK(server.requests("/flaky.txt") == 3);
  CHECK(server.requests("/busy.txt") == 4);
}

TEST_CASE("read_from_http gives up after its retries", "[io][http]") {
  HttpServer server;
  server.serve("/down.txt", "never\n");
  server.fail("/down.txt", 503);
  const std::string url = server.url("/down.txt");
  CHECK_THROWS_WITH(
      dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{url}) |
                              dpipe::io::read_from_http(quick({.retries = 2}))),
      Catch::Matches("read_from_http#[0-9]+: '" + url + "': HTTP status 503 \\(gave up after 3 attempts\\)"));
  CHECK(server.requests("/down.txt") == 3);

  SECTION("a server that is not there: connection failures are retried too") {
    // A port bound but not listening refuses connections, and no other program can take it.
    const int reserved = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(reserved >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(reserved, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::getsockname(reserved, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    const std::string gone = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/a.txt";
    CHECK_THROWS_WITH(dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{gone}) |
                                              dpipe::io::read_from_http(quick({.retries = 1}))),
                      Catch::Matches("read_from_http#[0-9]+: '" + gone +
                                     "': Couldn't connect to server: .* \\(gave up after 2 attempts\\)"));
    ::close(reserved);
  }
}

TEST_CASE("read_from_http raises DataError for a body cut short and a stalled server", "[io][http]") {
  HttpServer server;
  std::string body;
  for (int line = 0; line < 100; ++line) body += "line " + std::to_string(line) + "\n";
  server.serve("/cut.txt", body);
  server.truncate("/cut.txt", 100);
  server.serve("/stall.txt", body);
  server.stall("/stall.txt");
  const auto read = [&](const std::string& path, HttpOptions options) {
    return dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{server.url(path)}) |
                                   dpipe::io::read_from_http(quick(options)) |
                                   dpipe::io::readlines({}, dpipe::io::lines_only));
  };
  try {
    (void)read("/cut.txt", {});
    FAIL("no DataError");
  } catch (const DataError& error) {
    CHECK_THAT(error.what(), Catch::Matches("readlines#[0-9]+: '" + server.url("/cut.txt") +
                                            "' byte offset 100: Transferred a partial file: transfer closed with " +
                                            std::to_string(body.size() - 100) + " bytes remaining to read"));
    CHECK(error.byte_offset() == 100);
  }
  CHECK(server.requests("/cut.txt") == 1);  // the body had begun: no retry
  // The server sent its headers and then nothing: the read ends with the error, not a hang.
  CHECK_THROWS_WITH(read("/stall.txt", {.timeout = 300ms}),
                    Catch::Matches("readlines#[0-9]+: '" + server.url("/stall.txt") +
                                   "' byte offset 0: Timeout was reached: no data from the server for 300 ms"));
  CHECK(server.requests("/stall.txt") == 1);
  // A server that never answers times out before the response begins: that is retried.
  server.mute("/mute.txt");
  CHECK_THROWS_WITH(read("/mute.txt", {.timeout = 100ms, .retries = 1}),
                    Catch::Matches("read_from_http#[0-9]+: '" + server.url("/mute.txt") +
                                   "': Timeout was reached: no data from the server for 100 ms \\(gave up after 2 "
                                   "attempts\\)"));
  CHECK(server.requests("/mute.txt") == 2);
}

TEST_CASE("read_from_http refuses a body longer than max_bytes", "[io][http]") {
  HttpServer server;
  const std::string body(1000, 'z');
  server.serve("/sized.bin", body);
  server.serve("/streamed.bin", body);
  server.chunked("/streamed.bin");
  const auto open = [&](const std::string& path, std::uint64_t max_bytes) {
    auto files = dpipe::testing::collect(dpipe::iter::from(std::vector<std::string>{server.url(path)}) |
                                         dpipe::io::read_from_http(quick({.max_bytes = max_bytes})));
    REQUIRE(files.size() == 1);
    return read_all(files[0], 64 << 10);
  };
  CHECK(open("/sized.bin", 1000) == body);
  CHECK(open("/streamed.bin", 1000) == body);
  // A body that announces its length is refused at the request; one that does not, by the read
  // that goes past the limit.
  CHECK_THROWS_WITH(open("/sized.bin", 999),
                    Catch::Matches("read_from_http#[0-9]+: '" + server.url("/sized.bin") +
                                   "': the body has 1000 bytes, more than max_bytes \\(999\\)"));
  CHECK_THROWS_WITH(open("/streamed.bin", 999),
                    Catch::Matches("test: '" + server.url("/streamed.bin") +
                                   "' byte offset [0-9]+: the body is longer than max_bytes \\(999\\)"));
}

TEST_CASE("read_from_http with OnError::skip logs and counts the URLs it skips", "[io][http]") {
  HttpServer server;
  server.serve("/good.txt", "1\n2\n");
  server.serve("/down.txt", "x\n");
  server.fail("/down.txt", 500);
  dpipe::testing::LogCapture log;
  const std::vector<std::string> urls{server.url("/missing.txt"), server.url("/good.txt"), server.url("/down.txt")};
  const auto pipe = dpipe::iter::from(urls) |
                    dpipe::io::read_from_http(quick({.retries = 1, .on_error = dpipe::OnError::skip()})) |
                    dpipe::io::readlines({}, dpipe::io::lines_only);
  dpipe::graph::enable_statistics(pipe.ptr());
  CHECK(dpipe::testing::collect(pipe) == std::vector<std::string>{"1", "2"});
  const auto rows = dpipe::graph::statistics(pipe.ptr());
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].label.starts_with("read_from_http#"));
  CHECK(rows[1].skipped == 2);
  const auto messages = log.messages();
  REQUIRE(messages.size() == 2);
  CHECK_THAT(messages[0], Catch::Matches("read_from_http#[0-9]+: '" + urls[0] +
                                         "': HTTP status 404; skipped \\(1 in this epoch\\)"));
  CHECK_THAT(messages[1],
             Catch::Matches("read_from_http#[0-9]+: '" + urls[2] +
                            "': HTTP status 500 \\(gave up after 2 attempts\\); skipped \\(2 in this epoch\\)"));
}

TEST_CASE("read_from_http then decompress then readlines reads a compressed body", "[io][http]") {
  HttpServer server;
  // gzip of "alpha\nbeta\ngamma\n" (Python's gzip.compress with mtime=0).
  const std::string gzipped(
      "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\x4b\xcc\x29\xc8\x48\xe4\x4a\x4a\x2d\x49\xe4\x4a\x4f\xcc\xcd\x4d\xe4"
      "\x02\x00\x83\xbb\x9e\xad\x11\x00\x00\x00",
      37);
  server.serve("/words.txt.gz", gzipped);
  const std::vector<std::string> urls{server.url("/words.txt.gz")};
  const auto make = [&] {
    // [http_decompress]
    auto lines = dpipe::iter::from(urls) |  // URLs ending in .gz
                 dpipe::io::read_from_http({.timeout = std::chrono::seconds(30), .retries = 2}) |
                 dpipe::io::decompress() | dpipe::io::readlines({}, dpipe::io::lines_only);
    // [http_decompress]
    return lines;
  };
  CHECK(dpipe::testing::collect(make()) == std::vector<std::string>{"alpha", "beta", "gamma"});
  CHECK(restored_after(make, 1) == std::vector<std::string>{"beta", "gamma"});
}

TEST_CASE("Worker processes and threads read sharded URLs and restore mid-epoch", "[io][http][concurrency]") {
  HttpServer server;
  std::vector<std::string> expected;
  const auto urls =
      serve_parts(server, 6, 5, expected, [](int file, int line) { return std::to_string(file * 10 + line); });
  dpipe::testing::check_workers(
      [&] {
        // [http_sharded]
        return dpipe::iter::from(urls) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() |
               dpipe::io::read_from_http() | dpipe::io::readlines({}, dpipe::io::lines_only);
        // [http_sharded]
      },
      expected);
}

#pragma once
// HttpServer: a small HTTP/1.1 server on 127.0.0.1 (an ephemeral port) for the HTTP tests. It
// serves bodies by path, answers Range requests, logs every request, and plays scripted faults:
// an error status (for the first N requests or always), a body cut short, a server that stalls
// after its headers or never answers, a chunked body. One thread accepts; each connection gets
// a thread of its own and one request ("Connection: close"). The destructor wakes every thread
// through a self-pipe and joins them.

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <fcntl.h>
#include <limits>
#include <map>
#include <mutex>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

namespace dpipe::testing {

class HttpServer {
 public:
  /// One request the server received: its path, the first byte a Range header asked for, and
  /// its whole head (request line and headers).
  struct Request {
    std::string path{};
    std::optional<std::uint64_t> range_start{};
    std::string head{};
  };

  HttpServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    REQUIRE(::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener_, 64) == 0);
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    REQUIRE(::pipe2(stop_, O_CLOEXEC) == 0);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  ~HttpServer() {
    const char wake = 0;
    (void)!::write(stop_[1], &wake, 1);  // never read: every poll sees it from now on
    acceptor_.join();
    std::vector<std::thread> connections;
    {
      std::lock_guard lock(mutex_);
      connections.swap(connections_);
    }
    for (auto& connection : connections) connection.join();
    ::close(listener_);
    ::close(stop_[0]);
    ::close(stop_[1]);
  }

  /// "http://127.0.0.1:<port><path>".
  [[nodiscard]] std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  /// Serves `body` at `path`.
  void serve(const std::string& path, std::string body) {
    std::lock_guard lock(mutex_);
    routes_[path].body = std::move(body);
  }
  /// The first `count` requests for `path` answer `status` (then it is served as usual).
  void fail(const std::string& path, int status, std::size_t count = std::numeric_limits<std::size_t>::max()) {
    std::lock_guard lock(mutex_);
    routes_[path].fail_status = status;
    routes_[path].fail_count = count;
  }
  /// `path` announces its whole body but sends only its first `sent` bytes, then closes.
  void truncate(const std::string& path, std::size_t sent) {
    std::lock_guard lock(mutex_);
    routes_[path].truncate_at = sent;
  }
  /// `path` sends its headers and then nothing, until the server stops.
  void stall(const std::string& path) {
    std::lock_guard lock(mutex_);
    routes_[path].stall = true;
  }
  /// Requests for `path` are read and never answered, until the server stops.
  void mute(const std::string& path) {
    std::lock_guard lock(mutex_);
    routes_[path].mute = true;
  }
  /// `path` is sent in chunks (Transfer-Encoding: chunked), without a Content-Length.
  void chunked(const std::string& path) {
    std::lock_guard lock(mutex_);
    routes_[path].chunked = true;
  }
  /// Whether Range headers are answered (206) or ignored (200 with the whole body).
  void ranges(bool supported) {
    std::lock_guard lock(mutex_);
    ranges_ = supported;
  }

  /// The requests for `path` so far.
  [[nodiscard]] std::size_t requests(const std::string& path) const {
    std::lock_guard lock(mutex_);
    return static_cast<std::size_t>(
        std::count_if(log_.begin(), log_.end(), [&](const Request& request) { return request.path == path; }));
  }
  /// Every request so far, in the order they came.
  [[nodiscard]] std::vector<Request> log() const {
    std::lock_guard lock(mutex_);
    return log_;
  }
  /// Forgets the requests so far.
  void clear_log() {
    std::lock_guard lock(mutex_);
    log_.clear();
  }

 private:
  struct Route {
    std::optional<std::string> body{};
    int fail_status = 0;
    std::size_t fail_count = 0;
    std::optional<std::size_t> truncate_at{};
    bool stall = false;
    bool chunked = false;
    bool mute = false;
  };

  /// Waits until `fd` is ready for `events`; false when the server stops first.
  bool wait(int fd, short events) const {
    for (;;) {
      pollfd fds[2] = {{fd, events, 0}, {stop_[0], POLLIN, 0}};
      const int ready = ::poll(fds, 2, -1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0 || (fds[1].revents & POLLIN) != 0) return false;
      if (fds[0].revents != 0) return true;
    }
  }

  void accept_loop() {
    while (wait(listener_, POLLIN)) {
      const int connection = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (connection < 0) continue;
      std::lock_guard lock(mutex_);
      connections_.emplace_back([this, connection] {
        handle(connection);
        ::close(connection);
      });
    }
  }

  bool send_all(int fd, std::string_view bytes) const {
    while (!bytes.empty()) {
      const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent > 0) {
        bytes.remove_prefix(static_cast<std::size_t>(sent));
      } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (!wait(fd, POLLOUT)) return false;
      } else {
        return false;  // the client went away
      }
    }
    return true;
  }

  /// The request's head (through its blank line), or std::nullopt.
  std::optional<std::string> receive_head(int fd) const {
    std::string head;
    char buffer[4096];
    while (head.find("\r\n\r\n") == std::string::npos) {
      const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
      if (got > 0) {
        head.append(buffer, static_cast<std::size_t>(got));
        if (head.size() > 65536) return std::nullopt;
      } else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (!wait(fd, POLLIN)) return std::nullopt;
      } else {
        return std::nullopt;
      }
    }
    return head;
  }

  static std::optional<std::uint64_t> range_of(const std::string& head) {
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; });
    const auto at = lower.find("\r\nrange: bytes=");
    if (at == std::string::npos) return std::nullopt;
    const char* begin = head.data() + at + std::string_view("\r\nrange: bytes=").size();
    std::uint64_t start = 0;
    if (std::from_chars(begin, head.data() + head.size(), start).ec != std::errc{}) return std::nullopt;
    return start;
  }

  void handle(int fd) {
    const auto head = receive_head(fd);
    if (!head) return;
    const auto path_begin = head->find(' ') + 1;
    const std::string path = head->substr(path_begin, head->find(' ', path_begin) - path_begin);
    const auto range = range_of(*head);
    Route route;
    bool ranges = false;
    std::size_t count = 0;
    {
      std::lock_guard lock(mutex_);
      log_.push_back({path, range, *head});
      count = static_cast<std::size_t>(
          std::count_if(log_.begin(), log_.end(), [&](const Request& request) { return request.path == path; }));
      if (auto found = routes_.find(path); found != routes_.end()) route = found->second;
      ranges = ranges_;
    }
    if (route.mute) {
      (void)wait(stop_[0], POLLIN);  // until the server stops
      return;
    }
    if (route.fail_status != 0 && count <= route.fail_count) {
      (void)send_all(fd, "HTTP/1.1 " + std::to_string(route.fail_status) +
                             " Scripted\r\nContent-Length: 6\r\nConnection: close\r\n\r\nerror\n");
      return;
    }
    if (!route.body) {
      (void)send_all(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\nConnection: close\r\n\r\nnot found\n");
      return;
    }
    const std::string& body = *route.body;
    std::string_view slice = body;
    std::string head_out;
    if (range && ranges) {
      if (*range >= body.size()) {
        (void)send_all(fd, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */" +
                               std::to_string(body.size()) + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
      }
      slice.remove_prefix(static_cast<std::size_t>(*range));
      head_out = "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + std::to_string(*range) + "-" +
                 std::to_string(body.size() - 1) + "/" + std::to_string(body.size()) + "\r\n";
    } else {
      head_out = "HTTP/1.1 200 OK\r\n";
    }
    if (route.chunked) {
      head_out += "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
      if (!send_all(fd, head_out)) return;
      constexpr std::size_t kChunk = 4096;
      for (std::size_t at = 0; at < slice.size(); at += kChunk) {
        const auto piece = slice.substr(at, kChunk);
        char size[32];
        const auto end = std::to_chars(size, size + sizeof size, piece.size(), 16).ptr;
        if (!send_all(fd, std::string(size, end) + "\r\n") || !send_all(fd, piece) || !send_all(fd, "\r\n")) return;
      }
      (void)send_all(fd, "0\r\n\r\n");
      return;
    }
    head_out += "Content-Length: " + std::to_string(slice.size()) + "\r\nConnection: close\r\n\r\n";
    if (!send_all(fd, head_out)) return;
    if (route.stall) {
      (void)wait(stop_[0], POLLIN);  // until the server stops
      return;
    }
    if (route.truncate_at) slice = slice.substr(0, std::min(slice.size(), *route.truncate_at));
    (void)send_all(fd, slice);
  }

  int listener_ = -1;
  int stop_[2] = {-1, -1};
  std::uint16_t port_ = 0;
  mutable std::mutex mutex_;
  std::map<std::string, Route> routes_;
  std::vector<Request> log_;
  bool ranges_ = true;
  std::vector<std::thread> connections_;
  std::thread acceptor_;
};

}  // namespace dpipe::testing

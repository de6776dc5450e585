#pragma once
// RawPeer: a raw TCP connection to a TcpStore's server, to send what no TcpStore would (wrong
// handshakes, garbage, oversized frames) and read its framed replies.

#include <arpa/inet.h>
#include <cstdint>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include "distributed/tcp_store/protocol.hpp"

namespace dpipe::testing {

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

/// A framed handshake.
inline std::vector<std::byte> hello(std::uint32_t version, const std::string& token) {
  return dpipe::detail::store::frame(
      dpipe::detail::store::encode(dpipe::detail::store::Hello{version, token, std::nullopt}));
}

}  // namespace dpipe::testing

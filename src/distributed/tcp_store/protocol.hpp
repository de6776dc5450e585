#pragma once
// TcpStore's messages: the handshake, the requests and the replies, and their encoding (with
// dpipe's ByteWriter / ByteReader, so decoding is bounds-checked). A frame on the wire is a 4-byte
// length, then the message.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dpipe::detail::store {

/// The bytes a handshake starts with.
inline constexpr std::string_view kMagic = "dpipe-store";
/// The largest handshake a server reads before it knows the client.
inline constexpr std::size_t kMaxHelloBytes = 4096;

enum class Op : std::uint8_t { kSet = 1, kGet, kAdd, kCompareSet, kWait, kDelete };

struct Hello {
  std::uint32_t version = 0;
  std::string token;
};

struct Request {
  Op op = Op::kSet;
  std::string key;                 // every op but kWait
  std::vector<std::byte> value;    // kSet: the value; kCompareSet: the expected value
  std::vector<std::byte> desired;  // kCompareSet
  std::int64_t delta = 0;          // kAdd
  std::vector<std::string> keys;   // kWait
};

struct Reply {
  bool ok = true;
  std::vector<std::byte> body;  // kGet, kCompareSet: a value; kAdd: the sum as text; kDelete: one byte
  std::string error;            // when not ok
};

std::vector<std::byte> encode(const Hello& hello);
std::vector<std::byte> encode(const Request& request);
std::vector<std::byte> encode(const Reply& reply);

/// Decoders: each throws SerializationError for a message that is not one of its kind (short,
/// long, an unknown operation, a wrong magic).
Hello decode_hello(std::span<const std::byte> message);
Request decode_request(std::span<const std::byte> message);
Reply decode_reply(std::span<const std::byte> message);

/// `message` with its frame header in front.
std::vector<std::byte> frame(const std::vector<std::byte>& message);

/// What an operation is called in messages: "get('seed')".
std::string describe(const Request& request);

}  // namespace dpipe::detail::store

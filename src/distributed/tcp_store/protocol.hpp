#pragma once
// TcpStore's messages: the handshake, the requests and the replies, and their encoding (with
// dpipe's ByteWriter / ByteReader, so decoding is bounds-checked). A frame on the wire is a 4-byte
// length, then the message.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dpipe::detail::store {

/// The bytes a handshake starts with.
inline constexpr std::string_view kMagic = "dpipe-store";
/// The largest handshake a server reads before it knows the client.
inline constexpr std::size_t kMaxHelloBytes = 4096;

/// kExchange: Store::exchange; kLeave: the client's member leaves the job on purpose (a loader
/// that shuts down), so the server reports it as gone without waiting for its connection to close;
/// kWatch: answered only when another rank of a member is gone without leaving (a connection of
/// its own, which asks nothing else).
enum class Op : std::uint8_t { kSet = 1, kGet, kAdd, kCompareSet, kWait, kDelete, kExchange, kLeave, kWatch };

/// Who a client is in the job: a rank of a member (a loader's key prefix), or nobody (a client
/// that only reads and writes keys). The ranks of a member agree on the world size (0: unsaid)
/// and the fingerprint of what they run; a rank that disagrees with the first is refused.
struct Member {
  std::string name;
  std::uint64_t rank = 0;
  std::uint64_t world_size = 0;
  std::string fingerprint;
  friend auto operator<=>(const Member&, const Member&) = default;
};

struct Hello {
  std::uint32_t version = 0;
  std::string token;
  std::optional<Member> member;
};

struct Request {
  Op op = Op::kSet;
  std::string key;                     // every op but kWait and kLeave; kExchange: the round posted to;
                                       // kWatch: the member watched
  std::vector<std::byte> value;        // kSet, kExchange: the value; kCompareSet: the expected value
  std::vector<std::byte> desired;      // kCompareSet
  std::int64_t delta = 0;              // kAdd
  std::vector<std::string> keys;       // kWait
  std::string collect;                 // kExchange: the round collected (empty: none)
  std::uint64_t rank = 0;              // kExchange; kWatch: the watcher's rank (its own leaving is no news)
  std::uint64_t world_size = 0;        // kExchange
  std::uint64_t timeout_ms = 0;        // kExchange: how long a round may take from its first arrival
  std::uint64_t stall_warning_ms = 0;  // kExchange: how often a waiting rank hears who is missing (0: never)
};

/// What a refused request is, so the client raises the matching exception.
enum class Failure : std::uint8_t {
  kInvalid = 1,     // InvalidArgument: the request does not make sense
  kRendezvous = 2,  // RendezvousError: a rank of the round is gone, or the connection is refused
  kTimeout = 3,     // TimeoutError: a round did not complete in time
  kClosing = 4,     // the server shuts down on purpose (its process's loaders are gone): a client
                    // reconnects, to the server that process starts next, and asks again
  kStalled = 5,     // no failure: a round still waits, for the ranks named; its answer follows
};

struct Reply {
  bool ok = true;
  std::vector<std::byte> body;          // kGet, kCompareSet: a value; kAdd: the sum as text; kDelete: one byte;
                                        // kExchange: every rank's value (a std::vector<std::vector<std::byte>>)
  Failure failure = Failure::kInvalid;  // when not ok
  std::string error;                    // when not ok
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

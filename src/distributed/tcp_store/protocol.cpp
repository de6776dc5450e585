// TcpStore's messages.

#include "distributed/tcp_store/protocol.hpp"

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <dpipe/core/error.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::detail::store {
namespace {

/// Reads a whole message with `read`, refusing trailing bytes.
template <class Read>
auto decode_all(std::span<const std::byte> message, const char* kind, Read read) {
  ByteReader reader(message);
  auto decoded = read(reader);
  if (!reader.at_end()) DPIPE_THROW(SerializationError, "{} trailing bytes after a {}", reader.remaining(), kind);
  return decoded;
}

}  // namespace

std::vector<std::byte> encode(const Hello& hello) {
  std::vector<std::byte> out;
  ByteWriter writer(out);
  writer.write_bytes(kMagic.data(), kMagic.size());
  writer.write(hello.version);
  writer.write(hello.token);
  writer.write(hello.member.has_value());
  if (hello.member) {
    writer.write(hello.member->name);
    writer.write(hello.member->rank);
    writer.write(hello.member->world_size);
    writer.write(hello.member->fingerprint);
  }
  return out;
}

std::vector<std::byte> encode(const Request& request) {
  std::vector<std::byte> out;
  ByteWriter writer(out);
  writer.write(static_cast<std::uint8_t>(request.op));
  switch (request.op) {
    case Op::kSet:
      writer.write(request.key);
      writer.write(request.value);
      break;
    case Op::kAdd:
      writer.write(request.key);
      writer.write(request.delta);
      break;
    case Op::kCompareSet:
      writer.write(request.key);
      writer.write(request.value);
      writer.write(request.desired);
      break;
    case Op::kWait:
      writer.write(request.keys);
      break;
    case Op::kGet:
    case Op::kDelete:
      writer.write(request.key);
      break;
    case Op::kExchange:
      writer.write(request.key);
      writer.write(request.value);
      writer.write(request.collect);
      writer.write(request.rank);
      writer.write(request.world_size);
      writer.write(request.timeout_ms);
      writer.write(request.stall_warning_ms);
      break;
    case Op::kLeave:
      break;
    case Op::kWatch:
      writer.write(request.key);
      writer.write(request.rank);
      break;
  }
  return out;
}

std::vector<std::byte> encode(const Reply& reply) {
  std::vector<std::byte> out;
  ByteWriter writer(out);
  writer.write(reply.ok);
  if (reply.ok) {
    writer.write(reply.body);
  } else {
    writer.write(static_cast<std::uint8_t>(reply.failure));
    writer.write(reply.error);
  }
  return out;
}

Hello decode_hello(std::span<const std::byte> message) {
  return decode_all(message, "handshake", [](ByteReader& reader) {
    const auto magic = reader.take(kMagic.size());
    if (std::memcmp(magic.data(), kMagic.data(), kMagic.size()) != 0) {
      DPIPE_THROW(SerializationError, "not a dpipe store handshake");
    }
    Hello hello;
    hello.version = reader.read<std::uint32_t>();
    hello.token = reader.read<std::string>();
    if (reader.read<bool>()) {
      Member member;
      member.name = reader.read<std::string>();
      member.rank = reader.read<std::uint64_t>();
      member.world_size = reader.read<std::uint64_t>();
      member.fingerprint = reader.read<std::string>();
      hello.member = std::move(member);
    }
    return hello;
  });
}

Request decode_request(std::span<const std::byte> message) {
  return decode_all(message, "request", [](ByteReader& reader) {
    Request request;
    const auto op = reader.read<std::uint8_t>();
    if (op < static_cast<std::uint8_t>(Op::kSet) || op > static_cast<std::uint8_t>(Op::kWatch)) {
      DPIPE_THROW(SerializationError, "unknown operation {}", op);
    }
    request.op = static_cast<Op>(op);
    switch (request.op) {
      case Op::kSet:
        request.key = reader.read<std::string>();
        request.value = reader.read<std::vector<std::byte>>();
        break;
      case Op::kAdd:
        request.key = reader.read<std::string>();
        request.delta = reader.read<std::int64_t>();
        break;
      case Op::kCompareSet:
        request.key = reader.read<std::string>();
        request.value = reader.read<std::vector<std::byte>>();
        request.desired = reader.read<std::vector<std::byte>>();
        break;
      case Op::kWait:
        request.keys = reader.read<std::vector<std::string>>();
        break;
      case Op::kGet:
      case Op::kDelete:
        request.key = reader.read<std::string>();
        break;
      case Op::kExchange:
        request.key = reader.read<std::string>();
        request.value = reader.read<std::vector<std::byte>>();
        request.collect = reader.read<std::string>();
        request.rank = reader.read<std::uint64_t>();
        request.world_size = reader.read<std::uint64_t>();
        request.timeout_ms = reader.read<std::uint64_t>();
        request.stall_warning_ms = reader.read<std::uint64_t>();
        break;
      case Op::kLeave:
        break;
      case Op::kWatch:
        request.key = reader.read<std::string>();
        request.rank = reader.read<std::uint64_t>();
        break;
    }
    return request;
  });
}

Reply decode_reply(std::span<const std::byte> message) {
  return decode_all(message, "reply", [](ByteReader& reader) {
    Reply reply;
    reply.ok = reader.read<bool>();
    if (reply.ok) {
      reply.body = reader.read<std::vector<std::byte>>();
    } else {
      const auto failure = reader.read<std::uint8_t>();
      if (failure < static_cast<std::uint8_t>(Failure::kInvalid) ||
          failure > static_cast<std::uint8_t>(Failure::kStalled)) {
        DPIPE_THROW(SerializationError, "unknown failure {}", failure);
      }
      reply.failure = static_cast<Failure>(failure);
      reply.error = reader.read<std::string>();
    }
    return reply;
  });
}

std::vector<std::byte> frame(const std::vector<std::byte>& message) {
  std::vector<std::byte> out;
  ByteWriter writer(out);
  writer.write(static_cast<std::uint32_t>(message.size()));
  writer.write_bytes(message.data(), message.size());
  return out;
}

std::string describe(const Request& request) {
  switch (request.op) {
    case Op::kSet:
      return fmt::format("set('{}')", request.key);
    case Op::kGet:
      return fmt::format("get('{}')", request.key);
    case Op::kAdd:
      return fmt::format("add('{}', {})", request.key, request.delta);
    case Op::kCompareSet:
      return fmt::format("compare_set('{}')", request.key);
    case Op::kWait:
      return fmt::format("wait('{}')", fmt::join(request.keys, "', '"));
    case Op::kExchange:
      if (request.key == request.collect) {
        return fmt::format("all_gather('{}', rank {} of {})", request.key, request.rank, request.world_size);
      }
      if (request.collect.empty()) {
        return fmt::format("post('{}', rank {} of {})", request.key, request.rank, request.world_size);
      }
      if (request.key.empty()) {
        return fmt::format("collect('{}', rank {} of {})", request.collect, request.rank, request.world_size);
      }
      return fmt::format("exchange(post '{}', collect '{}', rank {} of {})", request.key, request.collect,
                         request.rank, request.world_size);
    case Op::kLeave:
      return "leave()";
    case Op::kWatch:
      return fmt::format("watch('{}', rank {})", request.key, request.rank);
    case Op::kDelete:
      break;
  }
  return fmt::format("remove('{}')", request.key);
}

}  // namespace dpipe::detail::store

#pragma once
/// \file
/// The dpipe exception hierarchy. Every exception dpipe throws derives from dpipe::Error; the
/// message names the node (its label, e.g. "batch#7"), the worker or rank, and what to do.
/// End of stream is never an exception.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/core.h>

namespace dpipe {

/// Root of the hierarchy. Thread-safety: immutable after construction.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A bad argument to a node, a reading service or the loader (torchdata's ValueError).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// A node has no valid length (torchdata's TypeError from `len()`).
class LengthError : public Error {
 public:
  using Error::Error;
};

/// Misuse of an object's protocol: a stale iterator, sharding twice on one path, iterating a loader
/// that has been shut down (torchdata's RuntimeError).
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A key a map pipe does not hold (torchdata's IndexError / KeyError).
class KeyError : public Error {
 public:
  using Error::Error;
};

/// A bounded buffer (fork, demux, unzip, ...) would have to grow beyond its limit because one
/// consumer fell too far behind (torchdata's BufferError).
class BufferOverflowError : public Error {
 public:
  using Error::Error;
};

/// A checkpoint blob that cannot be restored: another graph, a truncated or corrupted blob, or a
/// node that cannot save its state.
class StateError : public Error {
 public:
  using Error::Error;
};

/// A node of the graph cannot save its state (a user node without save_state/load_state).
/// DataLoader2 falls back to replaying the epoch when it meets one.
class StateNotSupportedError : public StateError {
 public:
  using StateError::StateError;
};

/// Bytes that do not decode into the expected value (truncated or malformed input).
class SerializationError : public Error {
 public:
  using Error::Error;
};

/// An exception thrown by a user function on one element (threadpool_map): the message names the
/// node, the element's index, and the original exception's type and message; the original is
/// nested (std::rethrow_if_nested).
class ElementError : public Error {
 public:
  using Error::Error;
};

/// A wait that lasted longer than its configured timeout.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

/// Something went wrong in a worker or dispatching process of MultiProcessingReadingService: a
/// user exception there (original_type() and original_message() say which), or the process died
/// (original_type() is empty and the message names the pid and the signal or exit status). An
/// exception raised while the process produced its elements also says at which element of its
/// stream (element()), and, when a node's function raised it (map, filter, flatmap, collate,
/// map_batches, groupby's key), which node (node()).
class WorkerError : public Error {
 public:
  WorkerError(std::string where, std::string original_type, std::string original_message, const std::string& what,
              std::string node = {}, std::optional<std::uint64_t> element = std::nullopt)
      : Error(what),
        where_(std::move(where)),
        original_type_(std::move(original_type)),
        original_message_(std::move(original_message)),
        node_(std::move(node)),
        element_(element) {}

  /// "worker process 1" or "dispatching process".
  [[nodiscard]] const std::string& where() const noexcept { return where_; }
  /// The type of the exception the process caught ("std::runtime_error"), or "" when it died.
  [[nodiscard]] const std::string& original_type() const noexcept { return original_type_; }
  /// That exception's what(), or how the process ended.
  [[nodiscard]] const std::string& original_message() const noexcept { return original_message_; }
  /// The label of the node whose function raised the exception ("map#3"), or "" when no node's
  /// function did (another node failed, worker_init_fn, a process that died).
  [[nodiscard]] const std::string& node() const noexcept { return node_; }
  /// The position in this epoch, from 0, of the element where()'s stream was producing when the
  /// exception was raised: the elements of that stream before it all reached the loop. Empty when
  /// the process was not producing elements (starting an epoch, a checkpoint, a process that died).
  [[nodiscard]] const std::optional<std::uint64_t>& element() const noexcept { return element_; }

 private:
  std::string where_;
  std::string original_type_;
  std::string original_message_;
  std::string node_;
  std::optional<std::uint64_t> element_;
};

/// The ranks of a distributed job cannot meet: an incomplete launcher environment, a store that
/// cannot be reached, a rank that failed or never arrived.
class RendezvousError : public Error {
 public:
  using Error::Error;
};

/// A feature a node or service does not support in this configuration (torchdata's
/// NotImplementedError).
class NotSupportedError : public Error {
 public:
  using Error::Error;
};

/// Bad data in a file or a stream: a missing or unreadable file, a line longer than the node's
/// limit, a truncated or corrupt record. The message and the accessors name the node, the file
/// (or URL), the member inside an archive when there is one, and the line number or byte offset.
/// Thread-safety: immutable after construction.
class DataError : public Error {
 public:
  /// Where the bad data is; empty / std::nullopt fields do not apply.
  struct Where {
    std::string path{};                          ///< the file or URL
    std::string member{};                        ///< the member of an archive, or empty
    std::optional<std::uint64_t> line{};         ///< 1-based line number
    std::optional<std::uint64_t> byte_offset{};  ///< offset in the file (or member) where it starts
  };

  /// "<node>: '<path>'[ member '<member>'][ line L][ byte offset O]: <reason>".
  DataError(std::string_view node, Where where, std::string_view reason);

  [[nodiscard]] const std::string& path() const noexcept { return where_.path; }
  [[nodiscard]] const std::string& member() const noexcept { return where_.member; }
  [[nodiscard]] std::optional<std::uint64_t> line() const noexcept { return where_.line; }
  [[nodiscard]] std::optional<std::uint64_t> byte_offset() const noexcept { return where_.byte_offset; }

 private:
  Where where_;
};

namespace detail {

/// Formats the message at compile-time-checked `format` and throws `Exception` with it.
template <class Exception, class... Args>
[[noreturn]] void throw_formatted(fmt::format_string<Args...> format, Args&&... args) {
  throw Exception(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace detail
}  // namespace dpipe

/// Throws `Exc` (a dpipe::Error) with a message formatted by fmt: DPIPE_THROW(InvalidArgument,
/// "batch_size must be > 0, got {}", n). The format string is checked at compile time.
#define DPIPE_THROW(Exc, ...) ::dpipe::detail::throw_formatted<Exc>(__VA_ARGS__)

#pragma once
/// \file
/// dpipe::io::ByteSource: the bytes behind an io::OpenedFile (a file descriptor, a decompressor, an
/// HTTP body, or a stream of a user's own scheme: see <dpipe/io/opener.hpp>).

#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace dpipe::io {

/// A source's failure to deliver bytes; OpenedFile turns it into a DataError naming the node, the
/// stream and the offset. The message is the reason ("cannot read: Input/output error").
class SourceFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A stream of bytes read front to back, owned by the OpenedFile made with it. Thread-safety: one
/// thread at a time.
class ByteSource {
 public:
  ByteSource() = default;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;
  virtual ~ByteSource() = default;

  /// Reads up to `size` bytes into `data`; returns how many, 0 at the end. SourceFailure on error.
  virtual std::size_t read(char* data, std::size_t size) = 0;

  /// Moves to `offset` from the start and returns true, or returns false when the source cannot
  /// seek (OpenedFile then reads forward). SourceFailure when the source is shorter than `offset`.
  virtual bool seek(std::uint64_t /*offset*/) { return false; }

  /// Reads up to `bytes` ahead into memory, so that the next reads wait for no round trip
  /// (open_files' read-ahead calls it on a thread of its own before the stream is read). A no-op
  /// by default, right for local sources. SourceFailure on error.
  virtual void prefetch(std::size_t /*bytes*/) {}
};

}  // namespace dpipe::io

#pragma once
/// \file
/// The on-disk cache of S3 objects: each object downloaded once into the cache's directory, keyed
/// by its URL, ETag and size, and read from there while it is unchanged. Safe across the threads,
/// worker processes and ranks of one machine. Private to src/io.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/s3.hpp>

namespace dpipe::io::detail {

/// Receives an object's bytes in order.
using ByteSink = std::function<void(const char* data, std::size_t size)>;
/// Writes the whole object into the sink (SourceFailure when it cannot); returns whether the
/// object's ETag is the MD5 of its bytes where it looks like one (not for SSE-KMS or SSE-C).
using Download = std::function<bool(const ByteSink& sink)>;

/// The cached copy of the object `url` with `etag` and `size`, open for reading at its start.
/// - A copy of the right size is used as it is, and marked as used now (its modification time):
///   the eviction removes the least recently used first.
/// - Otherwise one process downloads it (an exclusive lock per object; the other threads and
///   processes wait for that download, then use it): into a temporary file, checked against `size` and against the
///   ETag where that is an MD5, then renamed into place. A copy of the wrong size (partial,
///   corrupt) is dropped and fetched again, with a warning.
/// - After a download, the least recently used copies beyond the cache's max_bytes are removed
///   (never the one just fetched).
/// DataError naming `node` and `url` when the directory cannot be used or the download is bad.
/// Thread-safe.
[[nodiscard]] std::unique_ptr<ByteSource> cached_object(const S3CacheOptions& cache, const std::string& url,
                                                        const std::string& etag, std::uint64_t size,
                                                        const Download& download, std::string_view node);

}  // namespace dpipe::io::detail

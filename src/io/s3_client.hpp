#pragma once
/// \file
/// The S3 requests behind "s3://" paths: signed GETs (SigV4 through libcurl's CURLOPT_AWS_SIGV4),
/// their retries, ListObjectsV2 pages parsed with pugixml, and S3Source, an object read as a
/// stream that resumes at the byte reached. Private to src/io.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/s3.hpp>

#include "io/http_source.hpp"

namespace dpipe::io::detail {

/// "s3://bucket/key", split.
struct S3Location {
  std::string bucket;
  std::string key;

  /// "s3://<bucket>/<key>".
  [[nodiscard]] std::string url() const;
};

/// Splits an "s3://bucket/key" path; std::nullopt when it is not one (no bucket).
[[nodiscard]] std::optional<S3Location> parse_s3_url(std::string_view url);

/// What a listing or a HEAD tells of an object.
struct S3ObjectInfo {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;  ///< as S3 sends it, quotes included
};

/// What a listing found.
struct S3Listing {
  std::vector<S3ObjectInfo> objects;  ///< in the server's order (S3's: by key)
  bool has_prefixes = false;          ///< keys below the delimiter ("subdirectories") exist
};

/// The objects whose key starts with `prefix`, every page of ListObjectsV2; with `delimiter` "/",
/// only those directly under the prefix. DataError naming `node` and the bucket when S3 refuses
/// (with S3's code and message) or the retries run out.
[[nodiscard]] S3Listing list_s3_objects(const S3Options& options, const std::string& bucket, const std::string& prefix,
                                        std::string_view delimiter, std::string_view node);

/// The size and ETag of one object (a HEAD request); std::nullopt when there is none.
/// DataError naming `node` for any other failure.
[[nodiscard]] std::optional<S3ObjectInfo> head_s3_object(const S3Options& options, const S3Location& location,
                                                         std::string_view node);

/// One object's bytes, read front to back through signed GETs. A read that breaks (a reset, a
/// stall past the timeout, 5xx, SlowDown) is retried with a Range request at the byte reached,
/// with capped exponential backoff and full jitter, each retry logged; the retries count the
/// failures since the last byte received. Later requests carry If-Match with the first
/// response's ETag, so a changed object is an error, never a mix.
/// Failures are SourceFailures whose message has the HTTP status and S3's code and message.
/// Thread-safety: one thread at a time.
class S3Source final : public ByteSource {
 public:
  /// A source for `location`, not started. `etag` and `length`, when known (a checkpoint's), are
  /// required of every response.
  S3Source(S3Location location, S3Options options, std::string etag = {},
           std::optional<std::uint64_t> length = std::nullopt);
  ~S3Source() override;

  /// Requests the object from `offset` on and waits for the response's headers.
  void start(std::uint64_t offset);

  std::size_t read(char* data, std::size_t size) override;
  /// Starts a source not started yet at `offset`; false once started.
  bool seek(std::uint64_t offset) override;
  /// Reads up to `bytes` ahead into memory (starting the source at 0 when it is not started).
  void prefetch(std::size_t bytes) override;

  [[nodiscard]] const std::string& etag() const noexcept { return etag_; }
  [[nodiscard]] std::optional<std::uint64_t> length() const noexcept { return length_; }
  /// False for an object encrypted with SSE-KMS or SSE-C, whose ETag is not its bytes' MD5.
  [[nodiscard]] bool etag_is_digest() const noexcept { return etag_is_digest_; }

 private:
  /// Sends the request for the bytes from `offset` on, with the retries.
  void request(std::uint64_t offset);
  /// Reads from the current response, retrying a broken one from the byte reached.
  std::size_t read_body(char* data, std::size_t size);

  S3Location location_;
  S3Options options_;
  std::string etag_;
  std::optional<std::uint64_t> length_;
  std::unique_ptr<HttpSource> http_;
  std::uint64_t position_ = 0;  // the object offset of the next byte the response yields
  std::string ahead_;           // bytes read ahead by prefetch(), served first
  std::size_t ahead_begin_ = 0;
  unsigned failures_ = 0;  // since the last byte received
  bool etag_is_digest_ = true;
  bool started_ = false;
};

}  // namespace dpipe::io::detail

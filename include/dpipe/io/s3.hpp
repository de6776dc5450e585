#pragma once
/// \file
/// Objects in S3 and S3-compatible stores (MinIO, Ceph, R2, GCS's XML API) as paths:
/// "s3://bucket/key" goes wherever a path goes. `io::list_files("s3://bucket/prefix/")` lists
/// with ListObjectsV2, `io::open_files()` opens objects as streams, and a checkpoint inside an
/// object resumes with a byte-range GET. The settings are the process's: the environment, as the
/// AWS tools read it, until set_s3_options() replaces them. See docs/io.md, "Object stores".

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace dpipe::io {

/// Access keys; the secret never appears in a log line, an error, a checkpoint or a graph's
/// settings.
struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  /// Temporary credentials' token (sent as x-amz-security-token), or empty.
  std::string session_token{};
};

/// How a bucket is named in a request.
enum class S3Addressing {
  automatic,       ///< virtual-hosted for AWS's own endpoints, path-style for any other endpoint
  path_style,      ///< http://endpoint/bucket/key (MinIO, Ceph and most local servers)
  virtual_hosted,  ///< http://bucket.endpoint/key
};

/// The on-disk cache of objects (torchdata's on_disk_cache): each object is downloaded once, into
/// `directory`, and read from there while its ETag and size are unchanged.
struct S3CacheOptions {
  /// Where the objects go; empty: no cache.
  std::string directory{};
  /// The cache's size; the least recently used objects beyond it are removed after each download.
  std::uint64_t max_bytes = std::uint64_t{64} << 30;
};

/// How dpipe talks to the object store.
struct S3Options {
  /// The region requests are signed for; empty for "us-east-1".
  std::string region{};
  /// "http(s)://host[:port]" of an S3-compatible server; empty for AWS (https://s3.<region>.amazonaws.com).
  std::string endpoint{};
  S3Addressing addressing = S3Addressing::automatic;
  /// std::nullopt: anonymous requests (public buckets), unsigned.
  std::optional<S3Credentials> credentials{};
  /// Where the credentials came from, for error messages ("the environment", "~/.aws/credentials,
  /// profile 'x'"); empty when set by code.
  std::string credentials_source{};
  /// Longest wait for a connection.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  /// Longest wait without a byte from the server (a stalled response is retried); positive.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  /// Attempts after the first for a request that failed with a connection error, a timeout, a
  /// body cut short, 5xx, 503 SlowDown or 429; counted from the last byte received, so a long
  /// object read through several breaks is not given up on while it progresses.
  unsigned retries = 5;
  /// The cap on the first retry's wait; each next cap doubles, up to max_retry_delay. The wait is
  /// drawn uniformly below the cap ("full jitter").
  std::chrono::milliseconds retry_delay{std::chrono::milliseconds(100)};
  std::chrono::milliseconds max_retry_delay{std::chrono::seconds(5)};
  S3CacheOptions cache{};

  /// The settings the AWS tools would use here:
  /// - credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else from
  ///   the profile AWS_PROFILE names ("default") in the shared credentials file
  ///   (AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials), else from the config file
  ///   (AWS_CONFIG_FILE, ~/.aws/config); none found: anonymous;
  /// - the region from AWS_REGION, AWS_DEFAULT_REGION, then the profile's `region`;
  /// - the endpoint from AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then the profile's `endpoint_url`.
  /// InvalidArgument naming the file and line for a config file it cannot read.
  [[nodiscard]] static S3Options from_environment();
};

/// Replaces the process's S3 settings (by default S3Options::from_environment(), read at first
/// use). Worker processes forked later inherit them; set them before the loader starts.
/// InvalidArgument for an endpoint that is not "http://..." or "https://...", a negative
/// duration, a timeout of 0, or credentials with an empty key id or secret. Thread-safe.
void set_s3_options(S3Options options);

/// The process's S3 settings now. Thread-safe.
[[nodiscard]] S3Options s3_options();

}  // namespace dpipe::io

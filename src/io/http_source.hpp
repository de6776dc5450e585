#pragma once
/// \file
/// HttpSource: an HTTP body as a ByteSource, pulled through libcurl's multi interface, for
/// read_from_http() and the http and https openers. Private to src/io: no public header names
/// libcurl.

#include <cstddef>
#include <cstdint>
#include <curl/curl.h>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/read_from_http.hpp>

namespace dpipe::io::detail {

/// A transfer that failed: the reason ("HTTP status 404", "Timeout was reached: ..."), and for
/// an error status the status and the start of the response's body (an S3 error document).
class HttpFailure : public SourceFailure {
 public:
  explicit HttpFailure(const std::string& reason, bool retryable = false, long status = 0, std::string body = {})
      : SourceFailure(reason), retryable_(retryable), status_(status), body_(std::move(body)) {}

  /// Whether another attempt may succeed: a failed connection, a timeout, a body cut short, 5xx
  /// or 429. Not for other statuses, a changed length or a body over max_bytes.
  [[nodiscard]] bool retryable() const noexcept { return retryable_; }
  /// The response's status, 0 when none came.
  [[nodiscard]] long status() const noexcept { return status_; }
  /// Up to the first 64 KiB of an error response's body.
  [[nodiscard]] const std::string& body() const noexcept { return body_; }

 private:
  bool retryable_;
  long status_;
  std::string body_;
};

/// Sets further options on each request's libcurl handle before it is sent (S3 signing, a shared
/// connection cache). Called on the thread that sends the request.
using CurlSetup = std::function<void(CURL*)>;

/// The body of one GET, read front to back. start() sends the request (with its retries) and
/// waits for the response's headers; read() then drives the transfer only while it waits for
/// bytes: libcurl's write callback fills the reader's buffer and pauses the transfer when it is
/// full, so the body is never held in memory. Thread-safety: one thread at a time.
class HttpSource final : public ByteSource {
 public:
  /// A source for `url`, not started. `expected_length` is the body's length at the first
  /// request (a restore checks that it did not change), std::nullopt when not known.
  HttpSource(std::string url, const HttpOptions& options, std::optional<std::uint64_t> expected_length = std::nullopt,
             CurlSetup setup = {});
  HttpSource(const HttpSource&) = delete;
  HttpSource& operator=(const HttpSource&) = delete;
  ~HttpSource() override;

  /// Requests the body from `offset` on (a Range request when offset > 0) and waits for the
  /// response's headers, retrying as the options say; returns true when the body the source
  /// yields starts at `offset`, false when the server sent it whole (it ignores Range). An error
  /// status, a failed connection, a changed length or a body over max_bytes is an HttpFailure
  /// (with the status and the error body of the last attempt).
  bool start(std::uint64_t offset);

  /// The body's whole length, as the server announced it, or std::nullopt (while not started, or
  /// a body without Content-Length).
  [[nodiscard]] std::optional<std::uint64_t> length() const noexcept { return length_; }
  /// The response's ETag header, as sent (quotes included), or empty.
  [[nodiscard]] const std::string& etag() const noexcept { return etag_; }
  /// False when the response says the object is encrypted with SSE-KMS or SSE-C (S3's
  /// x-amz-server-side-encryption headers): its ETag is then not the MD5 of its bytes.
  [[nodiscard]] bool etag_is_digest() const noexcept { return etag_is_digest_; }

  std::size_t read(char* data, std::size_t size) override;
  /// Starts a source that is not started yet at `offset` (see start()); false for one started.
  bool seek(std::uint64_t offset) override;

 private:
  class Transfer;

  /// One attempt at the request; std::nullopt on success, else the failure.
  std::optional<HttpFailure> attempt(std::uint64_t offset);

  std::string url_;
  HttpOptions options_;
  std::optional<std::uint64_t> expected_length_;
  CurlSetup setup_;
  std::optional<std::uint64_t> length_;
  std::string etag_;
  bool etag_is_digest_ = true;
  std::unique_ptr<Transfer> transfer_;
  std::uint64_t position_ = 0;  // the body offset of the next byte read() returns
  bool started_ = false;
  bool empty_ = false;  // a restore at the very end of the body: nothing to request
};

/// The origin of a stream read_from_http() opened: "http[<settings>]:<url>", where the settings
/// are the length at the first request and the options a restore needs.
[[nodiscard]] std::string http_origin(const std::string& url, const HttpOptions& options,
                                      std::optional<std::uint64_t> length);

/// The HTTP stream `origin` names (an http_origin()), not requested yet: its first seek() or
/// read() sends the request. std::nullopt when `origin` is not one.
[[nodiscard]] std::optional<OpenedFile> reopen_http(const std::string& origin);

}  // namespace dpipe::io::detail

#pragma once
/// \file
/// `io::read_from_http(options)` (torchdata's HttpReader): each URL opened as an HTTP(S) GET whose
/// body streams through the io::OpenedFile it yields (path() is the URL), block by block, never
/// held in memory whole. Stateless: readers downstream save the URL and their offset, and a
/// restore asks the server for the rest of that one body (a Range request) or reads up to it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/detail/each_input.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io {

/// How read_from_http() requests each URL.
struct HttpOptions {
  /// Longest wait for the connection (TCP and TLS); 0 for libcurl's default (300 s).
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(30)};
  /// Longest wait without a byte from the server while a read waits for one (torchdata's
  /// timeout): the server that stops sending ends in a DataError, not a hang. Time the reader
  /// spends away from the stream does not count. 0 for no limit.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// Attempts after the first for a URL whose request failed before the response began
  /// (connection refused or reset, a timeout) or answered 5xx or 429. Never for other 4xx, and
  /// never once the body has begun.
  unsigned retries = 3;
  /// The wait before the first retry; each next retry waits twice as long (up to 10 minutes).
  std::chrono::milliseconds retry_delay{std::chrono::milliseconds(200)};
  /// A body longer than this is a DataError (at the request when the server announces its length,
  /// otherwise when the reader gets there); 0 for no limit.
  std::uint64_t max_bytes = 0;
  /// Extra request headers, "Name: value". A checkpoint's stream origin holds them, so that a
  /// restore sends them again: a checkpoint of a pipeline that sends credentials holds those.
  std::vector<std::string> headers{};
  /// A URL that cannot be fetched (an error status, a connection failure, retries spent): raise,
  /// or skip it (torchdata's skip_on_error=True).
  OnError on_error = {};
};

/// Opens `url` as read_from_http() does, with its retries. DataError naming `node` and the URL
/// when it cannot: "HTTP status 404", "Couldn't connect to server: ...", "Timeout was reached:
/// ...". Thread-safety: any thread (libcurl is initialised once per process).
[[nodiscard]] OpenedFile open_http(const std::string& url, const HttpOptions& options,
                                   std::string_view node = "read_from_http");

/// Yields each URL of its source opened for reading. Errors in a body (a connection cut short, a
/// stalled server, max_bytes exceeded) are DataErrors from the reader that meets them, naming the
/// URL and the byte offset. Thread-safety: one iterating thread.
class HttpReader final : public detail::EachInput<std::string, OpenedFile> {
 public:
  static constexpr std::string_view kName = "read_from_http";

  /// InvalidArgument when a duration in `options` is negative.
  HttpReader(const IterPipe<std::string>& urls, HttpOptions options);

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<HttpReader>(*this); }
  [[nodiscard]] bool stateless() const noexcept override { return true; }
  [[nodiscard]] NodeSettings settings() const override;

 protected:
  OpenedFile make(std::string url) override { return open_http(url, options_, label()); }

 private:
  HttpOptions options_;
};

/// `urls | io::read_from_http(options)`.
[[nodiscard]] inline auto read_from_http(HttpOptions options = {}) {
  return PipeAdaptor{[options = std::move(options)](const IterPipe<std::string>& urls) {
    return make_iter<HttpReader>(urls, options);
  }};
}

}  // namespace dpipe::io

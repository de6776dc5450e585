#include "io/s3_client.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <pugixml.hpp>
#include <random>
#include <thread>
#include <unistd.h>
#include <utility>

#include <fmt/core.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>

namespace dpipe::io::detail {
namespace {

/// SHA-256 of an empty payload: a GET's x-amz-content-sha256, which AWS requires and libcurl's
/// signing (7.88) neither sends nor computes for a value other than the payload's hash.
constexpr std::string_view kEmptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// The most of one listing or error document kept.
constexpr std::size_t kLongestDocument = std::size_t{64} << 20;

bool unreserved(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == '~';
}

/// `text` percent-encoded as SigV4's canonical request has it: every byte but the unreserved
/// ones (and '/' when `keep_slash`) as %XX.
std::string uri_encode(std::string_view text, bool keep_slash) {
  std::string encoded;
  encoded.reserve(text.size());
  for (const char c : text) {
    if (unreserved(c) || (keep_slash && c == '/')) {
      encoded += c;
    } else {
      encoded += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return encoded;
}

std::string region_of(const S3Options& options) { return options.region.empty() ? "us-east-1" : options.region; }

/// "https://host[:port]" of the requests, without a bucket.
std::string endpoint_of(const S3Options& options) {
  if (!options.endpoint.empty()) return options.endpoint;
  return fmt::format("https://s3.{}.amazonaws.com", region_of(options));
}

bool virtual_hosted(const S3Options& options, const std::string& bucket) {
  switch (options.addressing) {
    case S3Addressing::path_style:
      return false;
    case S3Addressing::virtual_hosted:
      return true;
    case S3Addressing::automatic:
      break;
  }
  // A bucket name with dots breaks the TLS name check of a virtual host; AWS's own advice.
  if (bucket.find('.') != std::string::npos) return false;
  if (options.endpoint.empty()) return true;
  const auto host_end = options.endpoint.find_first_of(":/", options.endpoint.find("://") + 3);
  const std::string_view host = std::string_view(options.endpoint).substr(0, host_end);
  return host.ends_with(".amazonaws.com");
}

/// The URL of `key` in `bucket` (the bucket itself for an empty key), with `query` (already
/// encoded, in sorted order) after it.
std::string request_url(const S3Options& options, const std::string& bucket, std::string_view key,
                        std::string_view query = {}) {
  const std::string endpoint = endpoint_of(options);
  std::string url;
  if (virtual_hosted(options, bucket)) {
    const auto host = endpoint.find("://") + 3;
    url = fmt::format("{}{}.{}/{}", endpoint.substr(0, host), bucket, endpoint.substr(host), uri_encode(key, true));
  } else {
    url = fmt::format("{}/{}", endpoint, bucket);
    if (!key.empty()) {
      url += '/';  // not "/" + ...: GCC 12's -Wrestrict false positive at -O3
      url += uri_encode(key, true);
    }
  }
  if (!query.empty()) url += fmt::format("?{}", query);
  return url;
}

/// Signs each request for `options`' region with its credentials (none: anonymous). The path is
/// sent as it is (a key may hold "." and ".." segments), and redirects are not followed: S3 does
/// not redirect a request it will serve, and a redirect would take the session token elsewhere.
CurlSetup curl_setup(const S3Options& options, bool head = false) {
  return [signing = fmt::format("aws:amz:{}:s3", region_of(options)), credentials = options.credentials,
          head](CURL* easy) {
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
    if (head) curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    if (!credentials) return;
    curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, signing.c_str());
    curl_easy_setopt(easy, CURLOPT_USERNAME, credentials->access_key_id.c_str());
    curl_easy_setopt(easy, CURLOPT_PASSWORD, credentials->secret_access_key.c_str());
  };
}

/// The request options: the timeouts, no retries of HttpSource's own (the callers retry), and the
/// headers S3 needs; `etag`, when known, as If-Match.
HttpOptions http_options(const S3Options& options, const std::string& etag = {}) {
  HttpOptions http;
  http.connect_timeout = options.connect_timeout;
  http.timeout = options.timeout;
  http.retries = 0;
  if (options.credentials) {
    http.headers.push_back(fmt::format("x-amz-content-sha256: {}", kEmptyPayloadHash));
    if (!options.credentials->session_token.empty())
      http.headers.push_back(fmt::format("x-amz-security-token: {}", options.credentials->session_token));
  }
  if (!etag.empty()) http.headers.push_back(fmt::format("If-Match: {}", etag));
  return http;
}

/// The failure as a message: the HTTP status, S3's code and message from the error document, and
/// for a refusal where the credentials came from.
std::string describe(const HttpFailure& failure, const S3Options& options) {
  std::string text = failure.what();
  if (!failure.body().empty()) {
    pugi::xml_document document;
    if (document.load_buffer(failure.body().data(), failure.body().size())) {
      const auto error = document.child("Error");
      const std::string_view code = error.child_value("Code");
      if (!code.empty()) text += fmt::format(", {}: {}", code, error.child_value("Message"));
    }
  }
  if (failure.status() == 403 || failure.status() == 401) {
    if (!options.credentials) {
      text += " (the request was anonymous: no S3 credentials were found)";
    } else if (!options.credentials_source.empty()) {
      text += fmt::format(" (signed with the credentials from {})", options.credentials_source);
    }
  }
  return text;
}

/// After failure number `failures` (from 1) of `what`: throws the SourceFailure that ends it when
/// it may not be retried or the retries are spent, else logs it and waits out the backoff.
void back_off_or_throw(const HttpFailure& failure, unsigned failures, const S3Options& options, std::string_view what) {
  if (!failure.retryable()) throw SourceFailure(describe(failure, options));
  if (failures > options.retries)
    throw SourceFailure(fmt::format("{} (gave up after {} attempts)", describe(failure, options), failures));
  // Full jitter: uniform below a cap that doubles with each retry.
  auto cap = options.retry_delay;
  for (unsigned i = 1; i < failures && cap < options.max_retry_delay; ++i) cap *= 2;
  cap = std::min(cap, options.max_retry_delay);
  // Seeded again in a forked worker, so that workers do not back off in step.
  thread_local pid_t seeded_in = 0;
  thread_local std::minstd_rand random;
  if (seeded_in != ::getpid()) {
    random.seed(std::random_device{}());
    seeded_in = ::getpid();
  }
  const auto wait = std::chrono::milliseconds(
      std::uniform_int_distribution<std::int64_t>(0, std::max<std::int64_t>(cap.count(), 0))(random));
  log_warning("s3: {}: {}; retry {} of {} in {} ms", what, describe(failure, options), failures, options.retries,
              wait.count());
  std::this_thread::sleep_for(wait);  // the backoff itself, not a poll
}

/// The whole body of a small GET (a listing page), with the retries.
std::string fetch_document(const S3Options& options, const std::string& url, std::string_view what) {
  for (unsigned failures = 0;;) {
    try {
      HttpSource http(url, http_options(options), std::nullopt, curl_setup(options));
      (void)http.start(0);
      std::string body;
      std::array<char, 64 * 1024> chunk{};
      while (const std::size_t got = http.read(chunk.data(), chunk.size())) {
        body.append(chunk.data(), got);
        if (body.size() > kLongestDocument)
          throw SourceFailure(fmt::format("the reply is longer than {} bytes", kLongestDocument));
      }
      return body;
    } catch (const HttpFailure& failure) {
      back_off_or_throw(failure, ++failures, options, what);
    }
  }
}

std::uint64_t to_number(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size())
    throw SourceFailure(fmt::format("the listing has a size that is not a number: '{}'", text));
  return value;
}

}  // namespace

std::string S3Location::url() const { return fmt::format("s3://{}/{}", bucket, key); }

std::optional<S3Location> parse_s3_url(std::string_view url) {
  constexpr std::string_view kPrefix = "s3://";
  if (!url.starts_with(kPrefix)) return std::nullopt;
  url.remove_prefix(kPrefix.size());
  const auto slash = url.find('/');
  S3Location location{std::string(url.substr(0, slash)),
                      slash == std::string_view::npos ? std::string() : std::string(url.substr(slash + 1))};
  if (location.bucket.empty()) return std::nullopt;
  return location;
}

S3Listing list_s3_objects(const S3Options& options, const std::string& bucket, const std::string& prefix,
                          std::string_view delimiter, std::string_view node) {
  const std::string shown = fmt::format("s3://{}/{}", bucket, prefix);
  S3Listing listing;
  auto& objects = listing.objects;
  std::string token;
  for (;;) {
    // The parameters in sorted order, as SigV4's canonical request has them (libcurl 7.88 signs
    // the query as it is given).
    std::string query;
    if (!token.empty()) query += fmt::format("continuation-token={}&", uri_encode(token, false));
    if (!delimiter.empty()) query += fmt::format("delimiter={}&", uri_encode(delimiter, false));
    query += fmt::format("list-type=2&prefix={}", uri_encode(prefix, false));
    pugi::xml_document document;
    try {
      const std::string body = fetch_document(options, request_url(options, bucket, {}, query), shown);
      if (!document.load_buffer(body.data(), body.size())) throw SourceFailure("the listing is not an XML document");
    } catch (const SourceFailure& failure) {
      throw DataError(node, {.path = shown}, fmt::format("cannot list: {}", failure.what()));
    }
    const auto result = document.child("ListBucketResult");
    if (!result) throw DataError(node, {.path = shown}, "cannot list: the reply is not a ListBucketResult");
    try {
      for (const auto contents : result.children("Contents"))
        objects.push_back(
            {contents.child_value("Key"), to_number(contents.child_value("Size")), contents.child_value("ETag")});
    } catch (const SourceFailure& failure) {
      throw DataError(node, {.path = shown}, fmt::format("cannot list: {}", failure.what()));
    }
    if (result.child("CommonPrefixes")) listing.has_prefixes = true;
    if (std::string_view(result.child_value("IsTruncated")) != "true") return listing;
    token = result.child_value("NextContinuationToken");
    if (token.empty())
      throw DataError(node, {.path = shown}, "cannot list: a truncated listing without a NextContinuationToken");
  }
}

std::optional<S3ObjectInfo> head_s3_object(const S3Options& options, const S3Location& location,
                                           std::string_view node) {
  const std::string url = request_url(options, location.bucket, location.key);
  for (unsigned failures = 0;;) {
    try {
      HttpSource http(url, http_options(options), std::nullopt, curl_setup(options, true));
      (void)http.start(0);
      if (!http.length())
        throw DataError(node, {.path = location.url()}, "cannot open: the HEAD response has no Content-Length");
      return S3ObjectInfo{location.key, *http.length(), http.etag()};
    } catch (const HttpFailure& failure) {
      if (failure.status() == 404) return std::nullopt;
      try {
        back_off_or_throw(failure, ++failures, options, location.url());
      } catch (const SourceFailure& final_failure) {
        throw DataError(node, {.path = location.url()}, fmt::format("cannot open: {}", final_failure.what()));
      }
    }
  }
}

S3Source::S3Source(S3Location location, S3Options options, std::string etag, std::optional<std::uint64_t> length)
    : location_(std::move(location)), options_(std::move(options)), etag_(std::move(etag)), length_(length) {}

S3Source::~S3Source() = default;

void S3Source::start(std::uint64_t offset) {
  started_ = true;
  request(offset);
}

void S3Source::request(std::uint64_t offset) {
  const std::string url = request_url(options_, location_.bucket, location_.key);
  const std::string what = offset == 0 ? fmt::format("GET {}", location_.url())
                                       : fmt::format("GET {} from byte {}", location_.url(), offset);
  for (;;) {
    try {
      http_ = std::make_unique<HttpSource>(url, http_options(options_, etag_), length_, curl_setup(options_));
      if (!http_->start(offset))
        throw HttpFailure(fmt::format("the server answered a request for bytes {}- with the whole object", offset));
      position_ = offset;
      if (etag_.empty()) etag_ = http_->etag();
      etag_is_digest_ = http_->etag_is_digest();
      if (!length_) length_ = http_->length();
      return;
    } catch (const HttpFailure& failure) {
      http_.reset();
      if (failure.status() == 412)
        throw SourceFailure(fmt::format("{} (the object changed since it was first read, when its ETag was {})",
                                        describe(failure, options_), etag_));
      back_off_or_throw(failure, ++failures_, options_, what);
    }
  }
}

std::size_t S3Source::read_body(char* data, std::size_t size) {
  for (;;) {
    try {
      if (!http_) request(position_);
      const std::size_t got = http_->read(data, size);
      position_ += got;
      if (got == 0 && length_ && position_ < *length_)
        throw HttpFailure(fmt::format("the body ended at byte {} of {}", position_, *length_), true);
      if (got > 0) failures_ = 0;  // progress: the retries count from here
      return got;
    } catch (const HttpFailure& failure) {
      http_.reset();
      back_off_or_throw(failure, ++failures_, options_,
                        fmt::format("GET {} broke at byte {}", location_.url(), position_));
    }
  }
}

std::size_t S3Source::read(char* data, std::size_t size) {
  if (ahead_begin_ < ahead_.size()) {
    const std::size_t take = std::min(size, ahead_.size() - ahead_begin_);
    std::copy_n(ahead_.data() + ahead_begin_, take, data);
    ahead_begin_ += take;
    if (ahead_begin_ == ahead_.size()) {
      ahead_.clear();
      ahead_.shrink_to_fit();
      ahead_begin_ = 0;
    }
    return take;
  }
  if (!started_) start(0);
  return read_body(data, size);
}

bool S3Source::seek(std::uint64_t offset) {
  if (started_) return false;
  start(offset);
  return true;
}

void S3Source::prefetch(std::size_t bytes) {
  if (!started_) start(0);
  std::array<char, 64 * 1024> chunk{};
  while (ahead_.size() - ahead_begin_ < bytes) {
    const std::size_t got = read_body(chunk.data(), std::min(chunk.size(), bytes - (ahead_.size() - ahead_begin_)));
    if (got == 0) break;
    ahead_.append(chunk.data(), got);
  }
}

}  // namespace dpipe::io::detail

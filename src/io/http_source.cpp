#include "io/http_source.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstring>
#include <curl/curl.h>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>

namespace dpipe::io::detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kScheme = "http[";
/// The backoff stops doubling here.
constexpr std::chrono::milliseconds kLongestRetryDelay = std::chrono::minutes(10);
/// The most of an error response's body kept for the caller.
constexpr std::size_t kLongestErrorBody = 64 * 1024;

/// libcurl's process-wide setup, once, before the first handle.
void init_curl() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw HttpFailure("cannot initialise libcurl");
  });
}

/// The idle libcurl multi handles of this process, each with its connection cache: a request takes
/// one and gives it back when it ends, so the next request to the same host reuses the connection
/// the last one left open. A handle is used by one thread at a time, as libcurl requires (its
/// shared connection cache is not safe across threads). A forked child starts with none: it must
/// never touch its parent's connections (closing an inherited TLS connection ends the parent's
/// session too), so those stay allocated, unused. Thread-safe, and safe across fork (the lock is
/// taken around it).
class MultiHandles {
 public:
  static MultiHandles& instance() {
    // Never destroyed: requests may run on other threads until the process exits.
    static auto* handles = [] {
      auto* created = new MultiHandles();
      ::pthread_atfork([] { instance().mutex_.lock(); }, [] { instance().mutex_.unlock(); },
                       [] {
                         auto& self = instance();
                         self.inherited_.insert(self.inherited_.end(), self.idle_.begin(), self.idle_.end());
                         self.idle_.clear();
                         self.mutex_.unlock();
                       });
      return created;
    }();
    return *handles;
  }

  /// An idle handle, or a new one (nullptr when libcurl cannot make one).
  CURLM* take() {
    {
      const std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        CURLM* multi = idle_.back();
        idle_.pop_back();
        return multi;
      }
    }
    return curl_multi_init();
  }

  /// Gives back a handle with no transfer in it; beyond kIdle idle ones, it is closed.
  void give(CURLM* multi) {
    {
      const std::lock_guard lock(mutex_);
      if (idle_.size() < kIdle) {
        idle_.push_back(multi);
        return;
      }
    }
    curl_multi_cleanup(multi);
  }

 private:
  static constexpr std::size_t kIdle = 16;
  std::mutex mutex_;
  std::vector<CURLM*> idle_;
  std::vector<CURLM*> inherited_;  // the parent's, never used or closed here
};

/// Whether `line` starts with the header name `name` (lower case, with its ':'), in any case.
bool has_name(std::string_view line, std::string_view name) noexcept {
  if (line.size() < name.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = line[i];
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower != name[i]) return false;
  }
  return true;
}

/// The value of the header `line` whose name (with its ':') is `name`, without the spaces around it.
std::string_view header_value(std::string_view line, std::string_view name) noexcept {
  std::string_view value = line.substr(name.size());
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
    value.remove_suffix(1);
  return value;
}

/// Parses the unsigned number at the front of `text`, moving past it.
std::optional<std::uint64_t> take_number(std::string_view& text) noexcept {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{}) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return value;
}

}  // namespace

/// One request through a multi handle of its own, driven only inside wait_headers() and read().
class HttpSource::Transfer {
 public:
  Transfer(const std::string& url, const HttpOptions& options, std::uint64_t offset, const CurlSetup& setup)
      : timeout_(options.timeout) {
    init_curl();
    easy_ = curl_easy_init();
    multi_ = MultiHandles::instance().take();
    if (easy_ == nullptr || multi_ == nullptr) throw HttpFailure("cannot create a libcurl handle");
    for (const auto& header : options.headers) {
      curl_slist* grown = curl_slist_append(headers_, header.c_str());
      if (grown == nullptr) throw HttpFailure("cannot add a request header");
      headers_ = grown;
    }
    const std::string range = fmt::format("{}-", offset);
    set(CURLOPT_URL, url.c_str());
    set(CURLOPT_PROTOCOLS_STR, "http,https");
    set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    set(CURLOPT_FOLLOWLOCATION, 1L);
    set(CURLOPT_MAXREDIRS, 10L);
    set(CURLOPT_NOSIGNAL, 1L);
    set(CURLOPT_USERAGENT, "dpipe");
    set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
    set(CURLOPT_ERRORBUFFER, error_.data());
    set(CURLOPT_HEADERFUNCTION, &Transfer::on_header);
    set(CURLOPT_HEADERDATA, this);
    set(CURLOPT_WRITEFUNCTION, &Transfer::on_body);
    set(CURLOPT_WRITEDATA, this);
    if (headers_ != nullptr) set(CURLOPT_HTTPHEADER, headers_);
    if (offset > 0) set(CURLOPT_RANGE, range.c_str());  // libcurl copies strings
    if (setup) setup(easy_);
    if (curl_multi_add_handle(multi_, easy_) != CURLM_OK) throw HttpFailure("cannot start a libcurl transfer");
    added_ = true;
  }

  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  ~Transfer() {
    if (added_) curl_multi_remove_handle(multi_, easy_);
    if (easy_ != nullptr) curl_easy_cleanup(easy_);
    if (multi_ != nullptr) MultiHandles::instance().give(multi_);
    curl_slist_free_all(headers_);
  }

  /// Drives the transfer until the final response's headers are in or it ended; false when the
  /// server sent nothing for the timeout.
  bool wait_headers() {
    return drive([this] { return headers_done_; });
  }

  [[nodiscard]] bool headers_done() const noexcept { return headers_done_; }
  [[nodiscard]] bool finished() const noexcept { return finished_; }
  [[nodiscard]] bool response_started() const noexcept { return response_started_; }
  [[nodiscard]] bool failed() const noexcept { return finished_ && result_ != CURLE_OK; }

  [[nodiscard]] long status() const noexcept {
    long status = 0;
    curl_easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &status);
    return status;
  }

  /// The Content-Length of the response, or std::nullopt.
  [[nodiscard]] std::optional<std::uint64_t> content_length() const noexcept {
    curl_off_t length = -1;
    if (curl_easy_getinfo(easy_, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) != CURLE_OK || length < 0)
      return std::nullopt;
    return static_cast<std::uint64_t>(length);
  }

  /// The ETag header of the response, or empty.
  [[nodiscard]] const std::string& etag() const noexcept { return etag_; }
  /// False when the response says the object is encrypted with SSE-KMS or SSE-C, whose ETags are
  /// not the MD5 of the bytes.
  [[nodiscard]] bool etag_is_digest() const noexcept { return etag_is_digest_; }

  /// The first byte of a 206's Content-Range ("bytes 5-9/10"), or std::nullopt.
  [[nodiscard]] std::optional<std::uint64_t> range_start() const noexcept { return range_start_; }
  /// The whole length a Content-Range names ("bytes 5-9/10", "bytes */10"), or std::nullopt.
  [[nodiscard]] std::optional<std::uint64_t> range_total() const noexcept { return range_total_; }

  /// libcurl's reason for the failed transfer: "Couldn't connect to server: Failed to connect ...".
  [[nodiscard]] std::string reason() const {
    const std::string detail = error_.data();
    if (detail.empty()) return curl_easy_strerror(result_);
    return fmt::format("{}: {}", curl_easy_strerror(result_), detail);
  }

  /// The failure of a server that sent nothing for the timeout.
  [[nodiscard]] std::string timeout_reason() const {
    return fmt::format("{}: no data from the server for {} ms", curl_easy_strerror(CURLE_OPERATION_TIMEDOUT),
                       timeout_.count());
  }

  /// Reads up to `size` bytes of the body; 0 at its end. HttpFailure when the transfer failed or
  /// the server sent nothing for the timeout.
  std::size_t read(char* data, std::size_t size) {
    if (size == 0) return 0;
    if (spill_begin_ < spill_.size()) {
      const std::size_t take = std::min(size, spill_.size() - spill_begin_);
      std::memcpy(data, spill_.data() + spill_begin_, take);
      spill_begin_ += take;
      return take;
    }
    if (finished_) {
      if (result_ != CURLE_OK) throw HttpFailure(reason(), true);
      return 0;
    }
    dest_ = data;
    room_ = size;
    filled_ = 0;
    bool in_time = true;
    try {
      if (paused_) {
        paused_ = false;
        // libcurl may hand over the bytes it held back right here, into dest_.
        const CURLcode resumed = curl_easy_pause(easy_, CURLPAUSE_CONT);
        if (resumed != CURLE_OK)
          throw HttpFailure(fmt::format("cannot resume the transfer: {}", curl_easy_strerror(resumed)));
      }
      in_time = drive([this] { return filled_ > 0; });
    } catch (...) {
      dest_ = nullptr;
      throw;
    }
    dest_ = nullptr;
    if (filled_ > 0) return filled_;
    if (!in_time) throw HttpFailure(timeout_reason(), true);
    if (result_ != CURLE_OK) throw HttpFailure(reason(), true);
    return 0;
  }

 private:
  template <class Option, class Value>
  void set(Option option, Value value) {
    const CURLcode code = curl_easy_setopt(easy_, option, value);
    if (code != CURLE_OK) throw HttpFailure(fmt::format("cannot set up the request: {}", curl_easy_strerror(code)));
  }

  /// Runs libcurl until `done()` or the end of the transfer (true), or until the server has sent
  /// nothing for the timeout (false). Waits in curl_multi_poll, never sleeps or spins.
  template <class Done>
  bool drive(Done done) {
    std::uint64_t seen = activity_;
    auto deadline = Clock::now() + timeout_;
    for (;;) {
      int running = 0;
      const CURLMcode code = curl_multi_perform(multi_, &running);
      if (code != CURLM_OK) throw HttpFailure(fmt::format("libcurl: {}", curl_multi_strerror(code)));
      int queued = 0;
      while (const CURLMsg* message = curl_multi_info_read(multi_, &queued)) {
        if (message->msg == CURLMSG_DONE) {
          finished_ = true;
          result_ = message->data.result;
        }
      }
      if (done() || finished_) return true;
      const auto now = Clock::now();
      if (activity_ != seen) {
        seen = activity_;
        deadline = now + timeout_;
      }
      int wait_ms = 1000;  // libcurl's own timers (connect timeout) wake it earlier
      if (timeout_.count() > 0) {
        if (now >= deadline) return false;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
        wait_ms = static_cast<int>(std::min<std::int64_t>(left, wait_ms));
      }
      const CURLMcode polled = curl_multi_poll(multi_, nullptr, 0, wait_ms, nullptr);
      if (polled != CURLM_OK) throw HttpFailure(fmt::format("libcurl: {}", curl_multi_strerror(polled)));
    }
  }

  static std::size_t on_header(char* text, std::size_t size, std::size_t count, void* self) {
    auto& transfer = *static_cast<Transfer*>(self);
    const std::size_t bytes = size * count;
    const std::string_view line(text, bytes);
    ++transfer.activity_;
    transfer.response_started_ = true;
    if (line.starts_with("HTTP/")) {  // a new response (after a redirect or a 100 Continue)
      transfer.location_ = false;
      transfer.range_start_.reset();
      transfer.range_total_.reset();
      transfer.etag_.clear();
      transfer.etag_is_digest_ = true;
    } else if (has_name(line, "etag:")) {
      transfer.etag_ = header_value(line, "etag:");
    } else if (has_name(line, "x-amz-server-side-encryption")) {
      // SSE-KMS ("x-amz-server-side-encryption: aws:kms" and its "-aws-kms-..." headers) and SSE-C
      // ("-customer-..."): the ETag is not the MD5 of the bytes. Plain "AES256" keeps it.
      const std::string_view name = line.substr(0, line.find(':') + 1);
      const bool further = name.size() > std::string_view("x-amz-server-side-encryption:").size();
      if (further || header_value(line, name).starts_with("aws:kms")) transfer.etag_is_digest_ = false;
    } else if (has_name(line, "location:")) {
      transfer.location_ = true;
    } else if (has_name(line, "content-range:")) {
      transfer.parse_content_range(line.substr(std::string_view("content-range:").size()));
    } else if (line == "\r\n" || line == "\n") {
      const long status = transfer.status();
      const bool interim = status / 100 == 1;
      const bool followed = status / 100 == 3 && transfer.location_;  // libcurl follows it
      if (!interim && !followed) transfer.headers_done_ = true;
    }
    return bytes;
  }

  void parse_content_range(std::string_view value) {
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (!value.starts_with("bytes ")) return;
    value.remove_prefix(6);
    if (value.starts_with("*")) {
      value.remove_prefix(1);
    } else {
      range_start_ = take_number(value);
      if (!value.starts_with("-")) return;
      value.remove_prefix(1);
      (void)take_number(value);
    }
    if (!value.starts_with("/")) return;
    value.remove_prefix(1);
    range_total_ = take_number(value);
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* self) {
    auto& transfer = *static_cast<Transfer*>(self);
    const std::size_t bytes = size * count;
    ++transfer.activity_;
    if (transfer.dest_ == nullptr || transfer.filled_ == transfer.room_) {
      transfer.paused_ = true;  // libcurl keeps these bytes and hands them over again on resume
      return CURL_WRITEFUNC_PAUSE;
    }
    const std::size_t take = std::min(bytes, transfer.room_ - transfer.filled_);
    std::memcpy(transfer.dest_ + transfer.filled_, data, take);
    transfer.filled_ += take;
    if (take < bytes) {  // the rest waits for the next read; the transfer pauses at the next chunk
      transfer.spill_.assign(data + take, data + bytes);
      transfer.spill_begin_ = 0;
    }
    return bytes;
  }

  std::chrono::milliseconds timeout_;
  CURL* easy_ = nullptr;
  CURLM* multi_ = nullptr;
  curl_slist* headers_ = nullptr;
  bool added_ = false;
  std::array<char, CURL_ERROR_SIZE> error_{};
  // The reader's buffer while read() drives the transfer.
  char* dest_ = nullptr;
  std::size_t room_ = 0;
  std::size_t filled_ = 0;
  // Bytes of a chunk that did not fit in the reader's buffer (less than one libcurl chunk).
  std::vector<char> spill_;
  std::size_t spill_begin_ = 0;
  std::uint64_t activity_ = 0;  // callbacks so far: the server sent something
  bool paused_ = false;
  bool headers_done_ = false;
  bool response_started_ = false;
  bool location_ = false;
  bool finished_ = false;
  CURLcode result_ = CURLE_OK;
  std::optional<std::uint64_t> range_start_;
  std::optional<std::uint64_t> range_total_;
  std::string etag_;
  bool etag_is_digest_ = true;
};

HttpSource::HttpSource(std::string url, const HttpOptions& options, std::optional<std::uint64_t> expected_length,
                       CurlSetup setup)
    : url_(std::move(url)), options_(options), expected_length_(expected_length), setup_(std::move(setup)) {}

HttpSource::~HttpSource() = default;

std::optional<HttpFailure> HttpSource::attempt(std::uint64_t offset) {
  transfer_ = std::make_unique<Transfer>(url_, options_, offset, setup_);
  auto& transfer = *transfer_;
  if (!transfer.wait_headers()) return HttpFailure(transfer.timeout_reason(), !transfer.response_started());
  if (!transfer.headers_done() && transfer.failed())
    return HttpFailure(transfer.reason(), !transfer.response_started());
  const long status = transfer.status();
  if (status == 416 && offset > 0 && transfer.range_total() == offset) {  // the checkpoint was at the end
    transfer_.reset();
    empty_ = true;
    length_ = offset;
    position_ = offset;
    return std::nullopt;
  }
  if (status < 200 || status > 299) {
    // The error document (S3's <Error><Code>...), for the caller's message.
    std::string body;
    try {
      std::array<char, 4096> chunk{};
      while (body.size() < kLongestErrorBody) {
        const std::size_t got = transfer.read(chunk.data(), chunk.size());
        if (got == 0) break;
        body.append(chunk.data(), got);
      }
    } catch (const HttpFailure&) {  // the status says enough
    }
    return HttpFailure(fmt::format("HTTP status {}", status), status >= 500 || status == 429, status, std::move(body));
  }
  etag_ = transfer.etag();
  etag_is_digest_ = transfer.etag_is_digest();
  if (status == 206) {
    if (transfer.range_start() != offset)
      return HttpFailure(fmt::format("the server answered a request for bytes {}- with other bytes", offset));
    length_ = transfer.range_total();
    position_ = offset;
  } else {
    length_ = transfer.content_length();
    position_ = 0;
  }
  if (expected_length_ && length_ && *length_ != *expected_length_)
    return HttpFailure(fmt::format("the body has {} bytes, it had {} before (it changed since the checkpoint)",
                                   *length_, *expected_length_));
  if (options_.max_bytes != 0 && length_ && *length_ > options_.max_bytes)
    return HttpFailure(fmt::format("the body has {} bytes, more than max_bytes ({})", *length_, options_.max_bytes));
  return std::nullopt;
}

bool HttpSource::start(std::uint64_t offset) {
  started_ = true;
  if (offset > 0 && expected_length_ == offset) {  // a checkpoint at the very end: nothing to request
    empty_ = true;
    length_ = offset;
    position_ = offset;
    return true;
  }
  auto delay = options_.retry_delay;
  for (unsigned attempts = 1;; ++attempts) {
    auto failure = attempt(offset);
    if (!failure) return position_ == offset;
    transfer_.reset();
    if (!failure->retryable() || attempts > options_.retries) {
      if (attempts == 1) throw *failure;
      throw HttpFailure(fmt::format("{} (gave up after {} attempts)", failure->what(), attempts), failure->retryable(),
                        failure->status(), failure->body());
    }
    std::this_thread::sleep_for(delay);  // exponential backoff between attempts
    if (delay < kLongestRetryDelay) delay = std::min(delay * 2, kLongestRetryDelay);
  }
}

std::size_t HttpSource::read(char* data, std::size_t size) {
  if (!started_) (void)start(0);
  if (empty_ || !transfer_) return 0;
  const std::size_t got = transfer_->read(data, size);
  if (options_.max_bytes != 0 && position_ + got > options_.max_bytes)
    throw HttpFailure(fmt::format("the body is longer than max_bytes ({})", options_.max_bytes));
  position_ += got;
  if (got == 0) transfer_.reset();  // the end: release the connection now
  return got;
}

bool HttpSource::seek(std::uint64_t offset) {
  if (started_) return false;
  return start(offset);
}

std::string http_origin(const std::string& url, const HttpOptions& options, std::optional<std::uint64_t> length) {
  std::string origin = fmt::format(
      "{}length={},max_bytes={},connect_timeout_ms={},timeout_ms={},retries={},"
      "retry_delay_ms={}",
      kScheme, length ? std::to_string(*length) : std::string("-"), options.max_bytes, options.connect_timeout.count(),
      options.timeout.count(), options.retries, options.retry_delay.count());
  for (const auto& header : options.headers) origin += fmt::format(",header={}:{}", header.size(), header);
  origin += "]:";
  origin += url;
  return origin;
}

std::optional<OpenedFile> reopen_http(const std::string& origin) {
  std::string_view text = origin;
  if (!text.starts_with(kScheme)) return std::nullopt;
  text.remove_prefix(kScheme.size());
  HttpOptions options;
  std::optional<std::uint64_t> length;
  for (;;) {
    const auto equals = text.find('=');
    if (equals == std::string_view::npos) return std::nullopt;
    const std::string_view key = text.substr(0, equals);
    text.remove_prefix(equals + 1);
    if (key == "header") {
      const auto size = take_number(text);
      if (!size || !text.starts_with(":") || text.size() < *size + 1) return std::nullopt;
      options.headers.emplace_back(text.substr(1, *size));
      text.remove_prefix(*size + 1);
    } else if (key == "length" && text.starts_with("-")) {
      text.remove_prefix(1);
    } else {
      const auto value = take_number(text);
      if (!value) return std::nullopt;
      if (key == "length") {
        length = *value;
      } else if (key == "max_bytes") {
        options.max_bytes = *value;
      } else if (key == "connect_timeout_ms") {
        options.connect_timeout = std::chrono::milliseconds(*value);
      } else if (key == "timeout_ms") {
        options.timeout = std::chrono::milliseconds(*value);
      } else if (key == "retries") {
        options.retries = static_cast<unsigned>(*value);
      } else if (key == "retry_delay_ms") {
        options.retry_delay = std::chrono::milliseconds(*value);
      } else {
        return std::nullopt;
      }
    }
    if (text.starts_with("]:")) break;
    if (!text.starts_with(",")) return std::nullopt;
    text.remove_prefix(1);
  }
  std::string url(text.substr(2));
  auto source = std::make_unique<HttpSource>(url, options, length);
  return OpenedFile(std::move(url), origin, std::move(source));
}

}  // namespace dpipe::io::detail

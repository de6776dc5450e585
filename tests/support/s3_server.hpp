#pragma once
// S3TestServer: a real S3-compatible server (s3rver, from npm) and a proxy in front of it, both in
// one Node.js process started from tests/s3/server.js on 127.0.0.1 at free ports. The proxy checks
// SigV4 signatures as AWS does (with the aws4 package), injects faults on request (a connection
// reset mid-object, 503 SlowDown, 500, a stalled response) and logs the requests it saw. The
// process ends with the server object, or when the test process dies (its stdin closes). The
// benchmarks use it too, so it reports failures as exceptions, not test assertions.

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <curl/curl.h>
#include <fcntl.h>
#include <filesystem>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <dpipe/io/s3.hpp>

namespace dpipe::testing {

class S3TestServer {
 public:
  /// The access key the proxy knows, and its secret.
  static constexpr const char* kKeyId = "dpipe-test";
  static constexpr const char* kSecret = "dpipe-test-secret";

  S3TestServer() {
    int to_child[2];
    int from_child[2];
    std::string pattern = "/tmp/dpipe-s3-XXXXXX";
    check(::mkdtemp(pattern.data()) != nullptr, "cannot create the server's data directory");
    data_ = pattern;
    check(::pipe2(to_child, O_CLOEXEC) == 0 && ::pipe2(from_child, O_CLOEXEC) == 0, "cannot create pipes");
    const std::string data = data_;
    pid_ = ::fork();
    check(pid_ >= 0, "cannot fork");
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::execlp("node", "node", DPIPE_S3_SERVER_SCRIPT, data.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    stdin_ = to_child[1];
    // The first line: {"server": <port>, "proxy": <port>}.
    std::string line;
    pollfd ready{from_child[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos) {
      const int polled = ::poll(&ready, 1, 60000);
      char chunk[256];
      const ssize_t got = polled == 1 ? ::read(from_child[0], chunk, sizeof chunk) : -1;
      check(got > 0, "tests/s3/server.js did not start: is Node.js installed, and tests/s3/node_modules (make deps)?");
      line.append(chunk, static_cast<std::size_t>(got));
    }
    ::close(from_child[0]);
    server_port_ = port_after(line, "\"server\":");
    proxy_port_ = port_after(line, "\"proxy\":");
  }

  S3TestServer(const S3TestServer&) = delete;
  S3TestServer& operator=(const S3TestServer&) = delete;

  ~S3TestServer() {
    ::close(stdin_);
    ::kill(pid_, SIGTERM);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    std::error_code ignored;
    std::filesystem::remove_all(data_, ignored);
  }

  /// "http://127.0.0.1:<port>" of the proxy (signature checks, faults, the log) or of s3rver itself;
  /// "http://s3.localhost:<port>" (proxy_endpoint("s3.localhost")) for virtual-hosted buckets.
  [[nodiscard]] std::string proxy_endpoint(const std::string& host = "127.0.0.1") const {
    return "http://" + host + ":" + std::to_string(proxy_port_);
  }
  [[nodiscard]] std::string server_endpoint() const { return "http://127.0.0.1:" + std::to_string(server_port_); }

  /// Settings for the proxy, signed with the test key; quick retries.
  [[nodiscard]] dpipe::io::S3Options options() const {
    dpipe::io::S3Options options;
    options.endpoint = proxy_endpoint();
    options.region = "us-east-1";
    options.credentials = dpipe::io::S3Credentials{kKeyId, kSecret};
    options.retry_delay = std::chrono::milliseconds(1);
    options.max_retry_delay = std::chrono::milliseconds(4);
    return options;
  }

  /// Uploads every file under `directory` into `bucket` (created if missing), keys `prefix` +
  /// their path relative to the directory.
  void upload(const std::string& bucket, const std::string& directory, const std::string& prefix = "") const {
    control("upload",
            "{\"bucket\":\"" + bucket + "\",\"directory\":\"" + directory + "\",\"prefix\":\"" + prefix + "\"}");
  }
  /// Creates an empty bucket.
  void create_bucket(const std::string& bucket) const { control("bucket", "{\"bucket\":\"" + bucket + "\"}"); }
  /// Queues a fault: {"mode": "reset"|"slowdown"|"internal"|"stall"|"stall_headers", "after_bytes": N,
  /// "times": K, "match": "<part of the path>"}.
  void fault(const std::string& json) const { control("fault", json); }
  /// Drops the faults and the request log.
  void clear() const { control("clear", "{}"); }
  /// The requests the proxy saw, as a JSON array.
  [[nodiscard]] std::string log() const { return request("GET", "log", ""); }

 private:
  static void check(bool ok, const std::string& what) {
    if (!ok) throw std::runtime_error("S3TestServer: " + what);
  }

  static int port_after(const std::string& line, const std::string& key) {
    const auto at = line.find(key);
    check(at != std::string::npos, "unexpected first line: " + line);
    return std::atoi(line.c_str() + at + key.size());
  }

  void control(const std::string& what, const std::string& json) const { (void)request("POST", what, json); }

  /// A control request to the proxy; its body. Fails the test on a status other than 200.
  [[nodiscard]] std::string request(const std::string& method, const std::string& what, const std::string& json) const {
    CURL* easy = curl_easy_init();
    check(easy != nullptr, "cannot create a libcurl handle");
    std::string body;
    const std::string url = proxy_endpoint() + "/__control/" + what;
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (method == "POST") curl_easy_setopt(easy, CURLOPT_POSTFIELDS, json.c_str());
    curl_easy_setopt(
        easy, CURLOPT_WRITEFUNCTION, +[](char* data, std::size_t size, std::size_t count, void* out) {
          static_cast<std::string*>(out)->append(data, size * count);
          return size * count;
        });
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
    const CURLcode result = curl_easy_perform(easy);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(easy);
    check(result == CURLE_OK && status == 200, "control request " + what + ": " + curl_easy_strerror(result) +
                                                   ", status " + std::to_string(status) + ": " + body);
    return body;
  }

  std::string data_;  // s3rver's files
  pid_t pid_ = -1;
  int stdin_ = -1;
  int server_port_ = 0;
  int proxy_port_ = 0;
};

}  // namespace dpipe::testing

#include "io/s3_cache.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>

#include "io/opener_registry.hpp"

namespace dpipe::io::detail {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kEntrySuffix = ".object";

/// A digest (SHA-256 for the entry names, MD5 for the ETag check) computed as bytes arrive.
class Digest {
 public:
  explicit Digest(const EVP_MD* algorithm) : context_(EVP_MD_CTX_new()) {
    if (context_ == nullptr || EVP_DigestInit_ex(context_, algorithm, nullptr) != 1)
      throw SourceFailure("cannot start a digest (OpenSSL)");
  }
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;
  ~Digest() { EVP_MD_CTX_free(context_); }

  void add(const char* data, std::size_t size) {
    if (EVP_DigestUpdate(context_, data, size) != 1) throw SourceFailure("cannot compute a digest (OpenSSL)");
  }

  /// The digest in lowercase hex.
  [[nodiscard]] std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> bytes{};
    unsigned size = 0;
    if (EVP_DigestFinal_ex(context_, bytes.data(), &size) != 1)
      throw SourceFailure("cannot compute a digest (OpenSSL)");
    std::string text;
    for (unsigned i = 0; i < size; ++i) text += fmt::format("{:02x}", bytes[i]);
    return text;
  }

 private:
  EVP_MD_CTX* context_;
};

/// An exclusive lock on a lock file, held until destroyed; blocks until it is free. Between
/// processes it is a POSIX record lock: the kernel releases it when its holder dies, so a crashed
/// download never blocks the others, and a worker forked while it is held does not inherit it
/// (a flock would be inherited, and held for the worker's life). Between the threads of one
/// process, which a record lock does not separate, a mutex per path. Thread-safe.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : thread_lock_(mutex_of(path)) {
    do {
      descriptor_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    } while (descriptor_ < 0 && errno == EINTR);
    if (descriptor_ < 0) throw SourceFailure(fmt::format("cannot open the lock '{}': {}", path, std::strerror(errno)));
    struct flock whole {};
    whole.l_type = F_WRLCK;
    whole.l_whence = SEEK_SET;
    while (::fcntl(descriptor_, F_SETLKW, &whole) != 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(descriptor_);
      throw SourceFailure(fmt::format("cannot lock '{}': {}", path, std::strerror(error)));
    }
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() { ::close(descriptor_); }  // releases the record lock, then the mutex

 private:
  /// The mutex of `path` in this process; never removed (one per object the process cached).
  static std::mutex& mutex_of(const std::string& path) {
    static std::mutex guard;
    static auto* mutexes = new std::map<std::string, std::unique_ptr<std::mutex>>();  // never destroyed
    const std::lock_guard lock(guard);
    auto& mutex = (*mutexes)[path];
    if (!mutex) mutex = std::make_unique<std::mutex>();
    return *mutex;
  }

  std::lock_guard<std::mutex> thread_lock_;
  int descriptor_ = -1;
};

/// The size of the regular file at `path`, or std::nullopt.
std::optional<std::uint64_t> file_size(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0 || !S_ISREG(status.st_mode)) return std::nullopt;
  return static_cast<std::uint64_t>(status.st_size);
}

/// Whether `etag` is a quoted MD5 of the bytes (a single-part upload's); multipart ETags end in
/// "-<parts>" and are not.
bool is_md5(std::string_view etag) {
  if (etag.size() == 34 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, 32);
  return etag.size() == 32 && std::all_of(etag.begin(), etag.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

std::string lowercase_md5(std::string_view etag) {
  if (etag.front() == '"') etag = etag.substr(1, 32);
  std::string text(etag);
  std::transform(text.begin(), text.end(), text.begin(),
                 [](char c) { return c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c; });
  return text;
}

void write_all(int descriptor, const char* data, std::size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t wrote = ::write(descriptor, data, size);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      throw SourceFailure(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
    }
    data += wrote;
    size -= static_cast<std::size_t>(wrote);
  }
}

/// Downloads the object into `entry` through a temporary file renamed into place.
void fill(const std::string& entry, const std::string& url, const std::string& etag, std::uint64_t size,
          const Download& download) {
  const std::string temporary = fmt::format("{}.{}.tmp", entry, ::getpid());
  int descriptor = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (descriptor < 0) throw SourceFailure(fmt::format("cannot create '{}': {}", temporary, std::strerror(errno)));
  try {
    Digest md5(EVP_md5());
    std::uint64_t written = 0;
    const bool etag_is_digest = download([&](const char* data, std::size_t count) {
      write_all(descriptor, data, count, temporary);
      md5.add(data, count);
      written += count;
    });
    const int closed = ::close(descriptor);
    descriptor = -1;
    if (closed != 0) throw SourceFailure(fmt::format("cannot write '{}': {}", temporary, std::strerror(errno)));
    if (written != size) throw SourceFailure(fmt::format("the download has {} bytes, the object {}", written, size));
    if (etag_is_digest && is_md5(etag)) {
      const std::string got = md5.hex();
      if (got != lowercase_md5(etag))
        throw SourceFailure(fmt::format("the downloaded bytes' MD5 is {}, the object's ETag {}", got, etag));
    }
    if (::rename(temporary.c_str(), entry.c_str()) != 0)
      throw SourceFailure(fmt::format("cannot rename '{}' to '{}': {}", temporary, entry, std::strerror(errno)));
  } catch (...) {
    if (descriptor >= 0) ::close(descriptor);
    ::unlink(temporary.c_str());
    throw;
  }
  log_debug("s3 cache: {} stored as {}", url, entry);
}

/// Removes the least recently used entries of `directory` beyond `max_bytes`, never `keep`.
void evict(const std::string& directory, std::uint64_t max_bytes, const std::string& keep) {
  const FileLock lock(fmt::format("{}/.evict.lock", directory));
  struct Entry {
    std::string path;
    std::uint64_t size;
    timespec used;
  };
  std::vector<Entry> entries;
  std::uint64_t total = 0;
  std::error_code error;
  for (const auto& file : fs::directory_iterator(directory, error)) {
    const std::string path = file.path().string();
    if (path.ends_with(".tmp")) {  // "<entry>.<pid>.tmp": a download of a process that died is dropped
      const auto dot = path.rfind('.', path.size() - 5);
      const long pid = std::strtol(path.c_str() + dot + 1, nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::unlink(path.c_str());
      continue;
    }
    if (!path.ends_with(kEntrySuffix)) continue;
    struct stat status {};
    if (::stat(path.c_str(), &status) != 0) continue;  // removed meanwhile
    entries.push_back({path, static_cast<std::uint64_t>(status.st_size), status.st_mtim});
    total += static_cast<std::uint64_t>(status.st_size);
  }
  if (total <= max_bytes) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const auto& entry : entries) {
    if (total <= max_bytes) break;
    if (entry.path == keep) continue;
    if (::unlink(entry.path.c_str()) == 0) {  // a reader that has it open keeps reading it
      total -= entry.size;
      log_debug("s3 cache: evicted {} ({} bytes)", entry.path, entry.size);
    }
  }
}

}  // namespace

std::unique_ptr<ByteSource> cached_object(const S3CacheOptions& cache, const std::string& url, const std::string& etag,
                                          std::uint64_t size, const Download& download, std::string_view node) {
  try {
    std::error_code error;
    fs::create_directories(cache.directory, error);
    if (error)
      throw SourceFailure(fmt::format("cannot create the cache directory '{}': {}", cache.directory, error.message()));
    Digest name(EVP_sha256());
    const std::string key = fmt::format("{}\n{}\n{}", url, etag, size);
    name.add(key.data(), key.size());
    const std::string stem = fmt::format("{}/{}", cache.directory, name.hex());
    const std::string entry = stem + std::string(kEntrySuffix);
    // A copy evicted between the check and the open is fetched again on the next round.
    for (;;) {
      if (file_size(entry) != size) {
        const FileLock lock(stem + ".lock");
        if (const auto found = file_size(entry); found != size) {
          if (found)
            log_warning("s3 cache: {}: the cached copy has {} bytes, the object {}; fetching it again", url, *found,
                        size);
          ::unlink(entry.c_str());
          fill(entry, url, etag, size, download);
          evict(cache.directory, cache.max_bytes, entry);
        }
      }
      ::utimensat(AT_FDCWD, entry.c_str(), nullptr, 0);  // used now, for the eviction's order
      try {
        return open_file_source(entry);
      } catch (const SourceFailure&) {
        if (file_size(entry)) throw;  // not an eviction
      }
    }
  } catch (const SourceFailure& failure) {
    throw DataError(node, {.path = url}, fmt::format("cannot cache: {}", failure.what()));
  }
}

}  // namespace dpipe::io::detail

// Record indexes: where they are kept, their file format, and when one is fresh.
//
// An index file is little-endian: a 96-byte header, then the payload: the indexed file's
// absolute path, the spans (16 bytes each), the blank lines (8 bytes each), the member names'
// ends (8 bytes each) and the names. The header ends with the payload's CRC32C and its own.

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/io/record_index.hpp>

#include "io/crc32c.hpp"
#include "io/index_scan.hpp"

namespace dpipe::io {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMagic = "DPIPEIDX";
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderSize = 96;
constexpr std::string_view kSuffix = ".dpipe-idx";

std::atomic<std::uint64_t> builds{0};

/// The size and modification time that say whether an index still describes its file.
struct FileState {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  friend bool operator==(const FileState&, const FileState&) = default;
};

FileState state_of(const struct stat& status) noexcept {
  return {static_cast<std::uint64_t>(status.st_size),
          static_cast<std::int64_t>(status.st_mtim.tv_sec) * 1'000'000'000 + status.st_mtim.tv_nsec};
}

/// A file descriptor, closed at the end of the scope.
class Descriptor {
 public:
  explicit Descriptor(int descriptor) noexcept : descriptor_(descriptor) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (descriptor_ >= 0) ::close(descriptor_);
  }
  [[nodiscard]] int get() const noexcept { return descriptor_; }

 private:
  int descriptor_;
};

int open_cloexec(const std::string& path, int flags, mode_t mode = 0) {
  int descriptor = -1;
  do {
    descriptor = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (descriptor < 0 && errno == EINTR);
  return descriptor;
}

FileState stat_of(int descriptor, const std::string& path, std::string_view node) {
  struct stat status {};
  if (::fstat(descriptor, &status) != 0)
    throw DataError(node, {.path = path}, fmt::format("cannot stat: {}", std::strerror(errno)));
  if (!S_ISREG(status.st_mode)) throw DataError(node, {.path = path}, "cannot index: it is not a regular file");
  return state_of(status);
}

std::int64_t coarse_now_ns() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

/// How long to wait until a change to a file in `state` would show in its modification time:
/// until the clock the kernel stamps files with has moved past the file's time (a whole second
/// past it on a file system that keeps seconds). A change made in the same clock tick as the one
/// before it keeps the time it had, so an index of a file that may still change in that tick could
/// not tell. 0 for files written more than a tick ago (nearly all), and for a time more than 2 s
/// ahead (a clock that is off is not waited for).
std::chrono::nanoseconds until_a_later_tick(const FileState& state) noexcept {
  constexpr std::int64_t kSecond = 1'000'000'000;
  const std::int64_t granularity = state.mtime_ns % kSecond == 0 ? kSecond : 1;
  const std::int64_t wait = state.mtime_ns + granularity - coarse_now_ns();
  if (wait <= 0 || wait > 2 * kSecond) return std::chrono::nanoseconds(0);
  timespec tick{};
  ::clock_getres(CLOCK_REALTIME_COARSE, &tick);
  return std::chrono::nanoseconds(wait + tick.tv_nsec);
}

/// The state of the file open as `descriptor` once a change to it would show in its modification
/// time (until_a_later_tick): one wait, again if the file changed meanwhile (three at most).
FileState settled_state(int descriptor, const std::string& path, std::string_view node) {
  FileState state = stat_of(descriptor, path, node);
  for (int wait = 0; wait < 3; ++wait) {
    const auto pause = until_a_later_tick(state);
    if (pause.count() == 0) break;
    std::this_thread::sleep_for(pause);
    state = stat_of(descriptor, path, node);
  }
  return state;
}

std::string absolute_path(const std::string& path) {
  std::error_code ignored;
  const auto absolute = fs::absolute(path, ignored);
  return (absolute.empty() ? fs::path(path) : absolute).lexically_normal().string();
}

/// FNV-1a, 64 bits: stable across builds and platforms (std::hash is not).
std::uint64_t fnv1a(std::string_view text) noexcept {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// --- the index file -------------------------------------------------------------------------------

void put32(std::string& out, std::uint32_t value) { out.append(reinterpret_cast<const char*>(&value), 4); }
void put64(std::string& out, std::uint64_t value) { out.append(reinterpret_cast<const char*>(&value), 8); }

/// Reads the header's fields in order.
class HeaderReader {
 public:
  explicit HeaderReader(const char* data) noexcept : at_(data) {}
  std::uint32_t u32() noexcept {
    std::uint32_t value = 0;
    std::memcpy(&value, at_, 4);
    at_ += 4;
    return value;
  }
  std::uint64_t u64() noexcept {
    std::uint64_t value = 0;
    std::memcpy(&value, at_, 8);
    at_ += 8;
    return value;
  }

 private:
  const char* at_;
};

/// The header's fields.
struct Header {
  IndexSpec spec;
  FileState file;
  std::uint64_t path_bytes = 0;
  std::uint64_t spans = 0;
  std::uint64_t blank = 0;
  std::uint64_t name_ends = 0;
  std::uint64_t names = 0;
  std::uint32_t payload_crc = 0;
};

/// The CRC32C of the payload of `index` whose absolute path is `path`.
std::uint32_t payload_crc(const RecordIndex& index, std::string_view path) {
  std::uint32_t crc = detail::crc32c_extend(0, path.data(), path.size());
  crc = detail::crc32c_extend(crc, reinterpret_cast<const char*>(index.spans.data()),
                              index.spans.size() * sizeof(RecordSpan));
  crc = detail::crc32c_extend(crc, reinterpret_cast<const char*>(index.blank.data()),
                              index.blank.size() * sizeof(std::uint64_t));
  crc = detail::crc32c_extend(crc, reinterpret_cast<const char*>(index.name_ends.data()),
                              index.name_ends.size() * sizeof(std::uint64_t));
  return detail::crc32c_extend(crc, index.names.data(), index.names.size());
}

std::string encode_header(const RecordIndex& index, std::string_view path) {
  std::string out(kMagic);
  put32(out, kVersion);
  put32(out, static_cast<std::uint32_t>(index.spec.kind));
  put32(out, static_cast<unsigned char>(index.spec.delimiter));
  put32(out, static_cast<unsigned char>(index.spec.quotechar));
  put64(out, index.spec.skip_lines);
  put64(out, index.file_size);
  put64(out, static_cast<std::uint64_t>(index.file_mtime_ns));
  put64(out, path.size());
  put64(out, index.spans.size());
  put64(out, index.blank.size());
  put64(out, index.name_ends.size());
  put64(out, index.names.size());
  put32(out, payload_crc(index, path));
  put32(out, detail::crc32c(out.data(), out.size()));
  return out;
}

bool write_all(int descriptor, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t wrote = ::write(descriptor, data, size);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += wrote;
    size -= static_cast<std::size_t>(wrote);
  }
  return true;
}

/// Writes `index` to `target` through a temporary file renamed over it; a failure is logged and
/// leaves `target` as it was.
void store(const RecordIndex& index, const std::string& absolute, const std::string& target, std::string_view node) {
  static std::atomic<std::uint64_t> serial{0};
  const std::string temporary = fmt::format("{}.tmp-{}-{}", target, ::getpid(), serial++);
  const auto fail = [&](std::string_view what) {
    log_warning("{}: '{}': cannot write its index '{}' ({}: {}); the index is used from memory", node, index.path,
                target, what, std::strerror(errno));
    ::unlink(temporary.c_str());
  };
  const Descriptor out(open_cloexec(temporary, O_WRONLY | O_CREAT | O_EXCL, 0644));
  if (out.get() < 0) return fail("cannot create a temporary file");
  const std::string header = encode_header(index, absolute);
  const bool written =
      write_all(out.get(), header.data(), header.size()) && write_all(out.get(), absolute.data(), absolute.size()) &&
      write_all(out.get(), reinterpret_cast<const char*>(index.spans.data()),
                index.spans.size() * sizeof(RecordSpan)) &&
      write_all(out.get(), reinterpret_cast<const char*>(index.blank.data()), index.blank.size() * 8) &&
      write_all(out.get(), reinterpret_cast<const char*>(index.name_ends.data()), index.name_ends.size() * 8) &&
      write_all(out.get(), index.names.data(), index.names.size());
  if (!written) return fail("cannot write");
  if (::rename(temporary.c_str(), target.c_str()) != 0) return fail("cannot rename the temporary file");
}

/// What load() found.
struct Loaded {
  std::optional<RecordIndex> index;  // a well-formed index (of any file state and spec)
  std::string problem;               // why there is none, when the file exists but is corrupt
  std::string stored_path;           // the absolute path it was built for
};

/// Reads `count` items of T at `offset` of `descriptor` into `out`; false when they are not all there.
template <class T>
bool read_items(int descriptor, std::uint64_t& offset, std::uint64_t count, std::vector<T>& out, std::string_view path,
                std::string_view node) {
  out.resize(static_cast<std::size_t>(count));
  const std::size_t bytes = out.size() * sizeof(T);
  if (detail::read_at(descriptor, reinterpret_cast<char*>(out.data()), bytes, offset, path, node) != bytes)
    return false;
  offset += bytes;
  return true;
}

/// Whether the spans, blank lines and names of `index` are in order and inside a file of
/// `file_size` bytes; "" or what is wrong.
std::string check_structure(const RecordIndex& index) {
  const std::uint64_t least = index.spec.kind == IndexKind::kTFRecord ? 16 : 0;  // a TFRecord's framing
  std::uint64_t end = 0;
  for (const auto& span : index.spans) {
    if (span.offset < end || span.size > index.file_size || span.offset > index.file_size - span.size)
      return "a record lies outside the file or before the one it follows";
    if (span.size < least) return "a record is shorter than its framing";
    end = span.offset + span.size;
  }
  for (std::size_t i = 0; i < index.blank.size(); ++i)
    if (index.blank[i] >= index.spans.size() || (i > 0 && index.blank[i] <= index.blank[i - 1]))
      return "a blank line is not a line of the index";
  if (index.spec.kind == IndexKind::kTar ? index.name_ends.size() != index.spans.size() : !index.name_ends.empty())
    return "the member names do not match the members";
  for (std::size_t i = 0; i < index.name_ends.size(); ++i)
    if (index.name_ends[i] > index.names.size() || (i > 0 && index.name_ends[i] < index.name_ends[i - 1]))
      return "a member name lies outside the names";
  return "";
}

Loaded load(const std::string& target, const std::string& path, std::string_view node) {
  Loaded loaded;
  const Descriptor in(open_cloexec(target, O_RDONLY));
  if (in.get() < 0) {
    if (errno != ENOENT) loaded.problem = fmt::format("cannot open it: {}", std::strerror(errno));
    return loaded;
  }
  struct stat status {};
  if (::fstat(in.get(), &status) != 0) {
    loaded.problem = fmt::format("cannot stat it: {}", std::strerror(errno));
    return loaded;
  }
  const auto total = static_cast<std::uint64_t>(status.st_size);
  char bytes[kHeaderSize];
  if (total < kHeaderSize || detail::read_at(in.get(), bytes, kHeaderSize, 0, target, node) != kHeaderSize) {
    loaded.problem = "it is shorter than its header";
    return loaded;
  }
  if (std::string_view(bytes, kMagic.size()) != kMagic) {
    loaded.problem = "it does not start with the magic number of a dpipe index";
    return loaded;
  }
  HeaderReader read(bytes + kMagic.size());
  const std::uint32_t version = read.u32();
  if (version != kVersion) {
    loaded.problem = fmt::format("it has format version {}; this dpipe reads version {}", version, kVersion);
    return loaded;
  }
  Header header;
  header.spec.kind = static_cast<IndexKind>(read.u32());
  header.spec.delimiter = static_cast<char>(read.u32());
  header.spec.quotechar = static_cast<char>(read.u32());
  header.spec.skip_lines = read.u64();
  header.file.size = read.u64();
  header.file.mtime_ns = static_cast<std::int64_t>(read.u64());
  header.path_bytes = read.u64();
  header.spans = read.u64();
  header.blank = read.u64();
  header.name_ends = read.u64();
  header.names = read.u64();
  header.payload_crc = read.u32();
  const std::uint32_t header_crc = read.u32();
  if (header_crc != detail::crc32c(bytes, kHeaderSize - 4)) {
    loaded.problem = "its header's CRC does not match";
    return loaded;
  }
  // Each count is bounded by the file's size before anything is allocated for it.
  const std::uint64_t room = total - kHeaderSize;
  if (header.path_bytes > room || header.spans > room / 16 || header.blank > room / 8 || header.name_ends > room / 8 ||
      header.names > room ||
      header.path_bytes + header.spans * 16 + header.blank * 8 + header.name_ends * 8 + header.names != room) {
    loaded.problem = "its size does not match what its header says it holds";
    return loaded;
  }
  RecordIndex index;
  index.path = path;
  index.spec = header.spec;
  index.file_size = header.file.size;
  index.file_mtime_ns = header.file.mtime_ns;
  loaded.stored_path.resize(static_cast<std::size_t>(header.path_bytes));
  index.names.resize(static_cast<std::size_t>(header.names));
  std::uint64_t offset = kHeaderSize + header.path_bytes;
  const bool complete =
      detail::read_at(in.get(), loaded.stored_path.data(), loaded.stored_path.size(), kHeaderSize, target, node) ==
          loaded.stored_path.size() &&
      read_items(in.get(), offset, header.spans, index.spans, target, node) &&
      read_items(in.get(), offset, header.blank, index.blank, target, node) &&
      read_items(in.get(), offset, header.name_ends, index.name_ends, target, node) &&
      detail::read_at(in.get(), index.names.data(), index.names.size(), offset, target, node) == index.names.size();
  if (!complete) {
    loaded.problem = "it became shorter while it was read";
    return loaded;
  }
  if (header.payload_crc != payload_crc(index, loaded.stored_path)) {
    loaded.problem = "its records' CRC does not match";
    return loaded;
  }
  if (auto problem = check_structure(index); !problem.empty()) {
    loaded.problem = std::move(problem);
    return loaded;
  }
  loaded.index = std::move(index);
  return loaded;
}

/// Why `index` does not describe a file in `state` with `spec` (built for `stored_path`, compared
/// with `absolute` when `same_path`); "" when it does.
std::string staleness(const RecordIndex& index, const FileState& state, const IndexSpec& spec,
                      const std::string& stored_path, const std::string& absolute, bool same_path) {
  if (same_path && stored_path != absolute) return fmt::format("it was built for '{}'", stored_path);
  if (index.spec.kind != spec.kind)
    return fmt::format("it was built for {} records, not {}", index_kind_name(index.spec.kind),
                       index_kind_name(spec.kind));
  if (index.spec != spec)
    return fmt::format(
        "it was built for another CSV dialect (delimiter '{}', quotechar '{}', skip_lines {}; now '{}', '{}', {})",
        index.spec.delimiter, index.spec.quotechar, index.spec.skip_lines, spec.delimiter, spec.quotechar,
        spec.skip_lines);
  if (index.file_size != state.size || index.file_mtime_ns != state.mtime_ns)
    return fmt::format(
        "the file has {} bytes and modification time {} ns, the index was built when it had {} bytes "
        "and time {} ns",
        state.size, state.mtime_ns, index.file_size, index.file_mtime_ns);
  return "";
}

/// Scans the file open as `descriptor` into a new index; again when it changed during the scan
/// (twice at most).
RecordIndex build(int descriptor, const std::string& path, const IndexSpec& spec, std::string_view node) {
  for (int attempt = 0;; ++attempt) {
    const FileState state = settled_state(descriptor, path, node);
    RecordIndex index;
    index.path = path;
    index.spec = spec;
    index.file_size = state.size;
    index.file_mtime_ns = state.mtime_ns;
    index.built = true;
    detail::scan_records(descriptor, state.size, index, node);
    ++builds;
    if (stat_of(descriptor, path, node) == state) return index;
    if (attempt == 2) throw DataError(node, {.path = path}, "cannot index: the file keeps changing while it is read");
  }
}

}  // namespace

std::string_view index_kind_name(IndexKind kind) noexcept {
  switch (kind) {
    case IndexKind::kTFRecord:
      return "TFRecord";
    case IndexKind::kLines:
      return "lines";
    case IndexKind::kCsv:
      return "CSV";
    case IndexKind::kTar:
      return "tar";
  }
  return "unknown";
}

std::string index_path(const std::string& path, const IndexOptions& options) {
  if (options.cache_dir.empty()) return path + std::string(kSuffix);
  const std::string absolute = absolute_path(path);
  return (fs::path(options.cache_dir) /
          fmt::format("{:016x}-{}{}", fnv1a(absolute), fs::path(absolute).filename().string(), kSuffix))
      .string();
}

RecordIndex index_file(const std::string& path, const IndexSpec& given, const IndexOptions& options,
                       std::string_view node) {
  if (path.find("://") != std::string::npos)
    throw DataError(node, {.path = path}, "cannot index: only local files can be indexed");
  const Descriptor file(open_cloexec(path, O_RDONLY));
  if (file.get() < 0) throw DataError(node, {.path = path}, fmt::format("cannot open: {}", std::strerror(errno)));
  const FileState state = stat_of(file.get(), path, node);
  const IndexSpec spec = given.kind == IndexKind::kCsv ? given : IndexSpec{.kind = given.kind};  // CSV's alone
  const std::string absolute = absolute_path(path);
  const std::string target = index_path(path, options);
  const bool refuse = options.on_stale == StaleIndex::kRefuse;

  Loaded loaded = load(target, path, node);
  if (loaded.index) {
    auto why = staleness(*loaded.index, state, spec, loaded.stored_path, absolute, !options.cache_dir.empty());
    if (why.empty()) return std::move(*loaded.index);
    if (refuse)
      throw DataError(node, {.path = path},
                      fmt::format("its index '{}' is stale: {} (StaleIndex::kRefuse; delete the index to build it "
                                  "again)",
                                  target, why));
    log_debug("{}: '{}': rebuilding its stale index '{}': {}", node, path, target, why);
  } else if (!loaded.problem.empty()) {
    if (refuse)
      throw DataError(node, {.path = path},
                      fmt::format("its index '{}' is corrupt: {} (StaleIndex::kRefuse; delete the index to build it "
                                  "again)",
                                  target, loaded.problem));
    log_warning("{}: '{}': rebuilding its corrupt index '{}': {}", node, path, target, loaded.problem);
  }

  RecordIndex index = build(file.get(), path, spec, node);
  if (!options.cache_dir.empty()) {
    std::error_code error;
    fs::create_directories(options.cache_dir, error);
  }
  store(index, absolute, target, node);
  return index;
}

namespace detail {

std::uint64_t index_builds() noexcept { return builds.load(); }

}  // namespace detail
}  // namespace dpipe::io

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/opened_file.hpp>

#include "io/opener_registry.hpp"

namespace dpipe::io {
namespace {

constexpr std::string_view kFileScheme = "file";

/// A file descriptor, closed with the source.
class FileSource final : public ByteSource {
 public:
  explicit FileSource(int descriptor) noexcept : descriptor_(descriptor) {}
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  ~FileSource() override { ::close(descriptor_); }

  std::size_t read(char* data, std::size_t size) override {
    for (;;) {
      const ssize_t got = ::read(descriptor_, data, size);
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno != EINTR) throw SourceFailure(fmt::format("cannot read: {}", std::strerror(errno)));
    }
  }

  bool seek(std::uint64_t offset) override {
    struct stat status {};
    if (::fstat(descriptor_, &status) != 0) throw SourceFailure(fmt::format("cannot seek: {}", std::strerror(errno)));
    if (offset > static_cast<std::uint64_t>(status.st_size))
      throw SourceFailure(fmt::format("the file has only {} bytes (it changed since the checkpoint)", status.st_size));
    if (::lseek(descriptor_, static_cast<off_t>(offset), SEEK_SET) < 0)
      throw SourceFailure(fmt::format("cannot seek: {}", std::strerror(errno)));
    return true;
  }

 private:
  int descriptor_;
};

/// Opens the local file `path`.
OpenedFile open_local(std::string path, std::string_view node) {
  int descriptor = -1;
  do {
    descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (descriptor < 0 && errno == EINTR);
  if (descriptor < 0) throw DataError(node, {.path = path}, fmt::format("cannot open: {}", std::strerror(errno)));
  auto source = std::make_unique<FileSource>(descriptor);
  struct stat status {};
  if (::fstat(descriptor, &status) == 0 && S_ISDIR(status.st_mode))
    throw DataError(node, {.path = path}, "cannot open: it is a directory");
  std::string origin = fmt::format("{}:{}", kFileScheme, path);
  return {std::move(path), std::move(origin), std::move(source)};
}

}  // namespace

namespace detail {

std::unique_ptr<ByteSource> open_file_source(const std::string& path) {
  int descriptor = -1;
  do {
    descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (descriptor < 0 && errno == EINTR);
  if (descriptor < 0) throw SourceFailure(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  return std::make_unique<FileSource>(descriptor);
}

void add_file_opener(const AddOpener& add) {
  add(kFileScheme, [](const std::string& origin, std::string_view node) {
    if (origin[kFileScheme.size()] != ':') throw malformed_origin(origin, kFileScheme, node);
    return open_local(origin.substr(kFileScheme.size() + 1), node);
  });
}

}  // namespace detail

OpenedFile OpenedFile::open(std::string path, std::string_view node) {
  if (detail::names_scheme(path)) return detail::open_origin(path, node);
  return open_local(std::move(path), node);
}

OpenedFile OpenedFile::reopen(const std::string& origin, std::uint64_t offset, std::string_view node) {
  auto file = detail::open_origin(origin, node);
  file.seek(offset, node);
  return file;
}

OpenedFile::OpenedFile(std::string path, std::string origin, std::unique_ptr<ByteSource> source) noexcept
    : path_(std::move(path)), origin_(std::move(origin)), source_(std::move(source)) {}

OpenedFile::OpenedFile(OpenedFile&& other) noexcept = default;
OpenedFile& OpenedFile::operator=(OpenedFile&& other) noexcept = default;
OpenedFile::~OpenedFile() = default;

std::size_t OpenedFile::read(char* data, std::size_t size, std::string_view node) {
  if (!source_) throw DataError(node, {.path = path_}, "read from a stream that was moved from");
  try {
    const std::size_t got = source_->read(data, size);
    offset_ += got;
    return got;
  } catch (const SourceFailure& failure) {
    throw DataError(node, {.path = path_, .byte_offset = offset_}, failure.what());
  }
}

void OpenedFile::prefetch(std::size_t bytes, std::string_view node) {
  if (!source_) throw DataError(node, {.path = path_}, "prefetch from a stream that was moved from");
  try {
    source_->prefetch(bytes);
  } catch (const SourceFailure& failure) {
    throw DataError(node, {.path = path_, .byte_offset = offset_}, failure.what());
  }
}

void OpenedFile::seek(std::uint64_t offset, std::string_view node) {
  if (!source_) throw DataError(node, {.path = path_}, "seek in a stream that was moved from");
  try {
    if (source_->seek(offset)) {
      offset_ = offset;
      return;
    }
  } catch (const SourceFailure& failure) {
    throw DataError(node, {.path = path_, .byte_offset = offset}, failure.what());
  }
  if (offset < offset_)
    throw DataError(node, {.path = path_, .byte_offset = offset},
                    fmt::format("cannot go back in a stream that is not a file (it is at byte {})", offset_));
  std::array<char, 64 * 1024> discarded{};
  while (offset_ < offset) {
    const auto wanted = static_cast<std::size_t>(std::min<std::uint64_t>(discarded.size(), offset - offset_));
    if (read(discarded.data(), wanted, node) == 0)
      throw DataError(node, {.path = path_, .byte_offset = offset},
                      fmt::format("the stream has only {} bytes (it changed since the checkpoint)", offset_));
  }
}

}  // namespace dpipe::io

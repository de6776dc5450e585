#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io {

OpenedFile OpenedFile::open(std::string path, std::string_view node) {
  int descriptor = -1;
  do {
    descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (descriptor < 0 && errno == EINTR);
  if (descriptor < 0) throw DataError(node, {.path = path}, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat status {};
  if (::fstat(descriptor, &status) == 0 && S_ISDIR(status.st_mode)) {
    ::close(descriptor);
    throw DataError(node, {.path = path}, "cannot open: it is a directory");
  }
  return {std::move(path), descriptor};
}

OpenedFile::OpenedFile(std::string path, int descriptor) noexcept : path_(std::move(path)), descriptor_(descriptor) {}

OpenedFile::OpenedFile(OpenedFile&& other) noexcept
    : path_(std::move(other.path_)),
      descriptor_(std::exchange(other.descriptor_, -1)),
      offset_(std::exchange(other.offset_, 0)) {}

OpenedFile& OpenedFile::operator=(OpenedFile&& other) noexcept {
  if (this != &other) {
    if (descriptor_ >= 0) ::close(descriptor_);
    path_ = std::move(other.path_);
    descriptor_ = std::exchange(other.descriptor_, -1);
    offset_ = std::exchange(other.offset_, 0);
  }
  return *this;
}

OpenedFile::~OpenedFile() {
  if (descriptor_ >= 0) ::close(descriptor_);
}

std::size_t OpenedFile::read(char* data, std::size_t size, std::string_view node) {
  if (descriptor_ < 0) throw DataError(node, {.path = path_}, "read from a file that was moved from");
  for (;;) {
    const ssize_t got = ::read(descriptor_, data, size);
    if (got >= 0) {
      offset_ += static_cast<std::uint64_t>(got);
      return static_cast<std::size_t>(got);
    }
    if (errno != EINTR)
      throw DataError(node, {.path = path_, .byte_offset = offset_},
                      fmt::format("cannot read: {}", std::strerror(errno)));
  }
}

void OpenedFile::seek(std::uint64_t offset, std::string_view node) {
  struct stat status {};
  if (descriptor_ < 0 || ::fstat(descriptor_, &status) != 0)
    throw DataError(node, {.path = path_}, fmt::format("cannot seek: {}", std::strerror(errno)));
  if (offset > static_cast<std::uint64_t>(status.st_size)) {
    throw DataError(node, {.path = path_, .byte_offset = offset},
                    fmt::format("the file has only {} bytes (it changed since the checkpoint)", status.st_size));
  }
  if (::lseek(descriptor_, static_cast<off_t>(offset), SEEK_SET) < 0)
    throw DataError(node, {.path = path_, .byte_offset = offset}, fmt::format("cannot seek: {}", std::strerror(errno)));
  offset_ = offset;
}

}  // namespace dpipe::io

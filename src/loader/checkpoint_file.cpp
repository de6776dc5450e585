// Checkpoint files: write to a temporary file, fsync, rename, fsync the directory.

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <dpipe/core/error.hpp>
#include <dpipe/loader/checkpoint_file.hpp>

namespace dpipe {
namespace {

/// Closes a file descriptor when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  /// Closes now, reporting a failure (a delayed write error shows up here).
  bool close() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

/// Throws StateError for `path`: what could not be done, and errno's reason.
[[noreturn]] void throw_file_error(const std::filesystem::path& path, const char* what) {
  DPIPE_THROW(StateError, "checkpoint file {}: {}: {}", path.string(), what, std::strerror(errno));
}

}  // namespace

void save_checkpoint_file(const std::filesystem::path& path, std::span<const std::byte> blob) {
  std::filesystem::path temporary = path;
  temporary += ".tmp-" + std::to_string(::getpid());
  FileDescriptor file(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (file.get() < 0) throw_file_error(temporary, "cannot create it");
  const auto fail = [&](const char* what) {
    const int error = errno;
    ::unlink(temporary.c_str());
    errno = error;
    throw_file_error(temporary, what);
  };
  for (std::size_t written = 0; written < blob.size();) {
    const ssize_t n = ::write(file.get(), blob.data() + written, blob.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot write it");
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(file.get()) != 0) fail("cannot flush it to disk");
  if (!file.close()) fail("cannot close it");
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail("cannot rename it over the checkpoint");
  const std::filesystem::path directory = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  FileDescriptor dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0 || ::fsync(dir.get()) != 0) throw_file_error(directory, "cannot flush the directory to disk");
}

std::vector<std::byte> load_checkpoint_file(const std::filesystem::path& path) {
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0) throw_file_error(path, "cannot open it");
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) throw_file_error(path, "cannot read its size");
  if (!S_ISREG(info.st_mode)) DPIPE_THROW(StateError, "checkpoint file {}: not a regular file", path.string());
  std::vector<std::byte> blob(static_cast<std::size_t>(info.st_size));
  for (std::size_t read = 0; read < blob.size();) {
    const ssize_t n = ::read(file.get(), blob.data() + read, blob.size() - read);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_file_error(path, "cannot read it");
    if (n == 0) {
      blob.resize(read);  // it shrank while being read: the loader's checks say what is wrong
      break;
    }
    read += static_cast<std::size_t>(n);
  }
  return blob;
}

}  // namespace dpipe

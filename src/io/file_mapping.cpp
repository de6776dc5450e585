// FileMapping, and the SIGBUS handler its copies run under.

#include "io/file_mapping.hpp"

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <utility>

namespace dpipe::io::detail {
namespace {

/// The jump out of the copy this thread is doing, or null.
thread_local sigjmp_buf* copy_in_progress = nullptr;
/// The SIGBUS action ours replaced when it was installed last.
struct sigaction previous_action {};
std::mutex installing;

/// A SIGBUS inside a copy ends the copy; any other goes where it went before.
extern "C" void on_sigbus(int signal, siginfo_t* info, void* context) {
  if (sigjmp_buf* copy = copy_in_progress; copy != nullptr) {
    copy_in_progress = nullptr;
    siglongjmp(*copy, 1);
  }
  if ((previous_action.sa_flags & SA_SIGINFO) != 0) {
    previous_action.sa_sigaction(signal, info, context);
  } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(signal);
  } else {
    // The default action: the faulting access runs again and the signal ends the process. (A
    // fault's SIGBUS cannot be ignored.)
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(SIGBUS, &default_action, nullptr);
  }
}

/// Makes on_sigbus the SIGBUS handler unless it is: once, and again after another handler took
/// its place (a test framework's, say), which it then passes other signals on to.
void install_handler() noexcept {
  const std::lock_guard lock(installing);
  struct sigaction current {};
  if (sigaction(SIGBUS, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) != 0 &&
      current.sa_sigaction == on_sigbus) {
    return;
  }
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  // SA_NODEFER: the jump out leaves SIGBUS unblocked, so the next cut file is caught too.
  action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &previous_action);
}

}  // namespace

FileMapping::FileMapping(int descriptor, std::uint64_t size) noexcept {
  if (size == 0) return;
  void* data = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, descriptor, 0);
  if (data == MAP_FAILED) return;
  ::madvise(data, static_cast<std::size_t>(size), MADV_RANDOM);  // a record's pages, not a read-ahead each
  data_ = static_cast<const char*>(data);
  size_ = size;
  install_handler();
}

FileMapping::FileMapping(FileMapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

FileMapping& FileMapping::operator=(FileMapping&& other) noexcept {
  if (this != &other) {
    FileMapping gone(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

FileMapping::~FileMapping() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), static_cast<std::size_t>(size_));  // NOLINT
}

void FileMapping::prefetch(std::uint64_t offset, std::size_t size) const noexcept {
  constexpr std::size_t kLine = 64;
  constexpr std::size_t kLines = 4;  // the hardware prefetcher follows a copy from there
  if (data_ == nullptr || offset >= size_) return;
  const std::uint64_t end = std::min<std::uint64_t>(size_, offset + std::min(size, kLine * kLines));
  for (std::uint64_t at = offset; at < end; at += kLine) __builtin_prefetch(data_ + at);
}

bool FileMapping::copy(std::uint64_t offset, std::size_t size, char* to) const noexcept {
  if (data_ == nullptr || offset > size_ || size > size_ - offset) return false;
  sigjmp_buf jump;
  if (sigsetjmp(jump, 0) != 0) return false;  // a page past the file's end now: the handler jumped here
  // The fences keep the compiler from moving the memcpy out from between the two stores, or
  // dropping the first as dead: a signal handler reads it.
  copy_in_progress = &jump;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(to, data_ + offset, size);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  copy_in_progress = nullptr;
  return true;
}

}  // namespace dpipe::io::detail

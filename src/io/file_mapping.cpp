// FileMapping, and the SIGBUS handler its copies run under.

#include "io/file_mapping.hpp"

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>

namespace dpipe::io::detail {
namespace {

/// The most maps all FileMappings hold at once: a quarter of Linux's default vm.max_map_count,
/// so that the process's other maps (malloc's, thread stacks, shared memory) never run short.
/// Files past it are read with pread.
constexpr int kMostMaps = 16384;
std::atomic<int> maps_held{0};

/// The copy this thread is doing, read by the signal handler: where to jump, and the bytes whose
/// fault ends the copy. Volatile, and set between signal fences: a handler reads them.
struct CopyInProgress {
  sigjmp_buf* volatile jump = nullptr;
  const char* volatile begin = nullptr;
  const char* volatile end = nullptr;
};
thread_local CopyInProgress copy_in_progress;
/// Set while this thread passes a signal on to the handler before ours: a handler that passes it
/// back to ours (it took ours as its own previous one) ends the loop there.
thread_local volatile bool passing_on = false;

/// The SIGBUS action ours replaced when it was installed last; written before it is published,
/// never changed after (a new install publishes a new one).
std::atomic<const struct sigaction*> previous_action{nullptr};

/// Lets SIGBUS end the process as it does by default: `signal` again, for one that no fault
/// raised (a fault's access runs again when the handler returns, and faults again).
void end_by_default(int signal, const siginfo_t* info) {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(SIGBUS, &default_action, nullptr);
  if (info == nullptr || info->si_code <= 0) ::raise(signal);
}

bool is_ours(const struct sigaction& action) noexcept;

/// A fault inside a copy's bytes ends the copy; any other SIGBUS goes where it went before.
extern "C" void on_sigbus(int signal, siginfo_t* info, void* context) {
  CopyInProgress& copy = copy_in_progress;
  if (sigjmp_buf* jump = copy.jump; jump != nullptr && info != nullptr && info->si_code > 0) {
    const auto* address = static_cast<const char*>(info->si_addr);
    if (address >= copy.begin && address < copy.end) {
      copy.jump = nullptr;
      siglongjmp(*jump, 1);
    }
  }
  const struct sigaction* previous = previous_action.load(std::memory_order_acquire);
  if (passing_on || previous == nullptr || is_ours(*previous)) {
    end_by_default(signal, info);
    return;
  }
  passing_on = true;
  if ((previous->sa_flags & SA_SIGINFO) != 0) {
    previous->sa_sigaction(signal, info, context);
  } else if (previous->sa_handler != SIG_DFL && previous->sa_handler != SIG_IGN) {
    previous->sa_handler(signal);
  } else {
    end_by_default(signal, info);  // a fault's SIGBUS cannot be ignored
  }
  passing_on = false;
}

bool is_ours(const struct sigaction& action) noexcept {
  return (action.sa_flags & SA_SIGINFO) != 0 && action.sa_sigaction == on_sigbus;
}

/// Makes on_sigbus the SIGBUS handler unless it is: once, and again after another handler took
/// its place (a test framework's, say), which it then passes other signals on to. No lock (a fork
/// could catch one held): two threads installing at once both install ours, and the second keeps
/// the first one's previous handler.
void install_handler() noexcept {
  struct sigaction current {};
  if (sigaction(SIGBUS, nullptr, &current) == 0 && is_ours(current)) return;
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  // SA_NODEFER: the jump out leaves SIGBUS unblocked, so the next cut file is caught too.
  action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  using Action = struct sigaction;
  auto* replaced = new Action{};  // NOLINT(cppcoreguidelines-owning-memory): published for good
  if (sigaction(SIGBUS, &action, replaced) != 0 || is_ours(*replaced)) {
    delete replaced;  // NOLINT(cppcoreguidelines-owning-memory)
    return;
  }
  previous_action.store(replaced, std::memory_order_release);  // the old one stays: a handler may read it
}

/// Set when the library loads: no guard on the copies' path, none a fork could catch held.
const auto page_bytes = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));

}  // namespace

FileMapping::FileMapping(int descriptor, std::uint64_t size) noexcept {
  if (size == 0) return;
  if (maps_held.fetch_add(1, std::memory_order_relaxed) >= kMostMaps) {
    maps_held.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  void* data = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, descriptor, 0);
  if (data == MAP_FAILED) {
    maps_held.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
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
  if (data_ == nullptr) return;
  ::munmap(const_cast<char*>(data_), static_cast<std::size_t>(size_));  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  maps_held.fetch_sub(1, std::memory_order_relaxed);
}

std::uint64_t FileMapping::witness(std::uint64_t offset, std::size_t size) const noexcept {
  return (offset + size + page_bytes - 1) / page_bytes * page_bytes;
}

void FileMapping::prefetch(std::uint64_t offset, std::size_t size) const noexcept {
  constexpr std::size_t kLine = 64;
  constexpr std::size_t kLines = 4;  // the hardware prefetcher follows a copy from there
  if (data_ == nullptr || offset >= size_) return;
  const std::uint64_t end = std::min<std::uint64_t>(size_, offset + std::min(size, kLine * kLines));
  for (std::uint64_t at = offset; at < end; at += kLine) __builtin_prefetch(data_ + at);
  if (const std::uint64_t after = witness(offset, size); after < size_) __builtin_prefetch(data_ + after);
}

bool FileMapping::copy(std::uint64_t offset, std::size_t size, char* to) const noexcept {
  // A file cut inside a page reads as zeros in the rest of that page: the copy only vouches for
  // bytes whose page is followed by one the file still holds (the witness faults otherwise).
  const std::uint64_t after = witness(offset, size);
  if (data_ == nullptr || offset > size_ || size > size_ - offset || after >= size_) return false;
  sigjmp_buf jump;
  if (sigsetjmp(jump, 0) != 0) return false;  // a fault in the bytes or the witness: the handler jumped here
  CopyInProgress& copy = copy_in_progress;
  copy.begin = data_ + offset;
  copy.end = data_ + after + 1;
  // The fences keep the compiler from moving the reads out from between the stores, or dropping
  // the stores as dead: a signal handler reads them.
  copy.jump = &jump;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(to, data_ + offset, size);
  const char witness_byte = *static_cast<const volatile char*>(data_ + after);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  copy.jump = nullptr;
  (void)witness_byte;
  return true;
}

}  // namespace dpipe::io::detail

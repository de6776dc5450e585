// Forking, watching and reaping child processes.

#include "children.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <poll.h>
#include <pthread.h>
#include <string>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/tensor/host_allocator.hpp>

namespace dpipe::detail::transport {
namespace {

/// "was killed by signal 9 (Killed)", "exited with status 3", from a waitpid status.
std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = strsignal(signal);
    return fmt::format("was killed by signal {} ({})", signal, name != nullptr ? name : "unknown");
  }
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  return fmt::format("ended with wait status {}", status);
}

}  // namespace

pid_t fork_child(const std::function<int()>& body) {
  // A scheduler's SIGTERM or a Ctrl-C reaches the whole process group: the main process decides,
  // whatever handler it had when it forked (it may checkpoint first, which needs the children).
  // They stay blocked across the fork until the child ignores them, so that one arriving before
  // the child first runs is discarded instead of meeting the parent's handler in the child.
  sigset_t preemption;
  sigset_t previous;
  sigemptyset(&preemption);
  sigaddset(&preemption, SIGINT);
  sigaddset(&preemption, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &preemption, &previous);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) {
    const int fork_error = errno;
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);  // a signal that arrived meanwhile reaches the parent now
    if (pid < 0) DPIPE_THROW(Error, "MultiProcessingReadingService: fork failed: {}", std::strerror(fork_error));
    return pid;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // the parent died before prctl took effect
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  int code = 70;
  try {
    code = body();
  } catch (...) {
  }
  _exit(code);  // no atexit handlers, no destructors of the parent's objects, no stdio flush
}

void Children::start(std::string name, const MakeChild& make) {
  const pid_t pid = fork_child([&] {
    // The forking thread's allocator may be pinned memory, which a child cannot use: its tensors are
    // encoded and freed, so the heap serves (a worker with a tensor arena makes its own current).
    const ScopedHostAllocator allocator(heap_allocator());
    try {
      return make()->run();
    } catch (...) {
      return 71;  // it cannot even start
    }
  });
  children_.push_back(Child{pid, std::move(name)});
}

std::string Children::who(std::size_t child) const {
  return fmt::format("{} (pid {})", children_.at(child).name, children_.at(child).pid);
}

std::vector<pid_t> Children::pids() const {
  std::vector<pid_t> pids;
  for (const auto& child : children_) pids.push_back(child.pid);
  return pids;
}

bool Children::is_stopped(std::size_t child) const {
  std::ifstream stat("/proc/" + std::to_string(children_.at(child).pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  // "pid (command) S ...": the state follows the command, which may hold spaces and parentheses.
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && (text[close + 2] == 'T' || text[close + 2] == 't');
}

bool Children::poll(Child& child) noexcept {
  if (child.reaped) return true;
  int status = 0;
  const pid_t result = waitpid(child.pid, &status, WNOHANG);
  if (result == 0) return false;
  child.reaped = true;
  // ECHILD: something else in this program reaped it (SIGCHLD ignored, or its own waitpid(-1)).
  child.status = result == child.pid ? status : -1;
  return true;
}

void Children::check(bool thorough) {
  if (interrupted_.load(std::memory_order_acquire)) {
    throw UsageError("MultiProcessingReadingService: the loader was shut down while waiting for a worker process");
  }
  if (!thorough) return;
  for (auto& child : children_) {
    if (!poll(child)) continue;
    const std::string how =
        child.status == -1 ? std::string("ended (its status was collected elsewhere)") : describe_exit(child.status);
    throw WorkerError(child.name, "", how,
                      fmt::format("MultiProcessingReadingService: {} (pid {}) {}; the epoch cannot continue",
                                  child.name, child.pid, how));
  }
}

bool Children::stop(std::chrono::milliseconds grace) noexcept {
  // After a timeout a child is stuck: the error reaches the caller now, not after a grace period.
  const auto deadline = std::chrono::steady_clock::now() + (timed_out_ ? std::chrono::milliseconds(0) : grace);
  for (auto& child : children_) {
    if (poll(child)) continue;
    // Sleep until the child exits or the grace period ends: a pidfd becomes readable at exit.
    // Without pidfd support (Linux < 5.3) there is no way to sleep on it: the child is killed.
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child.pid, 0));
    if (pidfd < 0) continue;
    while (!poll(child)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd watch{pidfd, POLLIN, 0};
      ::poll(&watch, 1, static_cast<int>(left.count()));
    }
    close(pidfd);
  }
  for (auto& child : children_) {
    if (child.reaped) continue;
    kill(child.pid, SIGKILL);
    int status = 0;
    while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
    }
    child.reaped = true;
    child.status = status;
  }
  return true;
}

Children::~Children() { (void)stop(std::chrono::milliseconds(0)); }

}  // namespace dpipe::detail::transport

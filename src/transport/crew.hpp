#pragma once
// Crew: a service's children as its main side sees them, forked processes (Children) or threads
// (ChildThreads). The service's protocol runs the same over either; only starting, watching and
// ending the children differs. Private to the library.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include "endpoint.hpp"

namespace dpipe::detail::transport {

/// What a child runs: built in the child (a forked process, or a thread), then run until told to
/// stop.
class ChildBody {
 public:
  virtual ~ChildBody() = default;
  /// Runs until the main side says stop; returns the exit status.
  virtual int run() = 0;
};

/// Builds a child's body; runs in the child.
using MakeChild = std::function<std::unique_ptr<ChildBody>()>;

/// Thread-safety: the group's thread, but interrupt().
class Crew : public Liveness {
 public:
  virtual ~Crew() = default;

  /// Starts child number size(), called `name` ("worker process 1"), which runs make()'s body.
  virtual void start(std::string name, const MakeChild& make) = 0;
  [[nodiscard]] virtual std::size_t size() const noexcept = 0;
  /// The child's name, and how messages point at it: "worker process 1 (pid 42)", "worker thread 1".
  [[nodiscard]] virtual const std::string& name(std::size_t child) const = 0;
  [[nodiscard]] virtual std::string who(std::size_t child) const = 0;
  /// Whether the child is stopped by SIGSTOP or a debugger.
  [[nodiscard]] virtual bool is_stopped(std::size_t child) const = 0;
  /// The children's process ids (none for threads).
  [[nodiscard]] virtual std::vector<pid_t> pids() const = 0;

  /// Ends every wait on the children from now on (shutdown): check() throws UsageError.
  virtual void interrupt() noexcept = 0;
  /// Waits up to `grace` for every child to end (they were told to), then ends the rest as far as
  /// it can: a process is killed; a thread cannot be, so it is left running detached. Returns
  /// whether every child ended.
  virtual bool stop(std::chrono::milliseconds grace) noexcept = 0;

 protected:
  Crew() = default;
};

}  // namespace dpipe::detail::transport

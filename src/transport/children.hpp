#pragma once
// A service's child processes: forking them, noticing their deaths, and ending them (the Crew of
// processes). Private to the library.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "crew.hpp"

namespace dpipe::detail::transport {

/// Forks a child that runs `body` and exits with its result (or 70 when it throws); never
/// returns in the child. The child gets SIGKILL when the thread that forked it ends
/// (PR_SET_PDEATHSIG), exits at once if the parent is already gone, and ignores SIGINT and
/// SIGTERM (the main process decides how a Ctrl-C or a scheduler's preemption ends the workers).
pid_t fork_child(const std::function<int()>& body);

/// A forked child: its pid, its name in messages ("worker process 1"), and how it ended.
struct Child {
  pid_t pid = -1;
  std::string name;
  bool reaped = false;
  int status = 0;
};

/// The main process's view of its children. Thread-safety: one thread at a time, but interrupt().
class Children final : public Crew {
 public:
  Children() = default;
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  /// Ends the children that still run (see stop()).
  ~Children() override;

  /// Forks the child (fork_child); it exits with run()'s status, or 71 when make() throws.
  void start(std::string name, const MakeChild& make) override;
  [[nodiscard]] std::size_t size() const noexcept override { return children_.size(); }
  [[nodiscard]] const std::string& name(std::size_t child) const override { return children_.at(child).name; }
  [[nodiscard]] std::string who(std::size_t child) const override;
  [[nodiscard]] bool is_stopped(std::size_t child) const override;
  [[nodiscard]] std::vector<pid_t> pids() const override;

  /// Throws WorkerError naming the first child that died (checked with waitpid when `thorough`),
  /// or UsageError after interrupt().
  void check(bool thorough) override;
  void interrupt() noexcept override { interrupted_.store(true, std::memory_order_release); }
  /// A wait on a child timed out: it is stuck, and stop() kills without waiting for it to end.
  void timed_out() noexcept override { timed_out_ = true; }

  /// Waits up to `grace` for every child to exit (they were told to), then kills the rest with
  /// SIGKILL, and reaps them all. Never blocks longer than `grace` plus the kernel's kill time.
  bool stop(std::chrono::milliseconds grace) noexcept override;

 private:
  /// Reaps `child` if it ended; returns whether it did.
  static bool poll(Child& child) noexcept;

  std::vector<Child> children_;
  std::atomic<bool> interrupted_{false};
  bool timed_out_ = false;
};

}  // namespace dpipe::detail::transport

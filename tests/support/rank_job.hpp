#pragma once
// A distributed job of real processes on this machine: starts one process per rank with the
// environment a launcher would give it, collects what each prints, and waits for all of them
// with a deadline (a rank still running then is killed and reported, never waited for forever).

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <spawn.h>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace dpipe::testing {

/// The variables of the launchers dpipe reads: a rank's environment starts without them.
inline bool is_launcher_variable(const std::string& name) {
  static const char* const kExact[] = {"RANK",        "WORLD_SIZE", "LOCAL_RANK",          "LOCAL_WORLD_SIZE",
                                       "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"};
  static const char* const kPrefixes[] = {"SLURM_", "OMPI_", "PMI_", "PMIX_", "DPIPE_STORE_", "DPIPE_TEST_"};
  for (const char* exact : kExact) {
    if (name == exact) return true;
  }
  for (const char* prefix : kPrefixes) {
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

using Environment = std::map<std::string, std::string>;

/// torchrun's variables for `rank` of `world`, its store on MASTER_PORT and dpipe's on the next port.
inline Environment torchrun_environment(std::size_t rank, std::size_t world, std::uint16_t dpipe_port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(dpipe_port - 1)},
          {"TORCHELASTIC_RUN_ID", "test-" + std::to_string(::getpid())}};
}

/// What one rank did: its exit (`status` from waitpid) and what it printed.
struct RankOutcome {
  int status = 0;
  std::string out;
  std::string err;
  bool killed_at_deadline = false;

  [[nodiscard]] bool exited(int code) const { return WIFEXITED(status) && WEXITSTATUS(status) == code; }
  [[nodiscard]] bool signaled(int signal) const { return WIFSIGNALED(status) && WTERMSIG(status) == signal; }
};

/// Starts `program args...` once per entry of `ranks` (each with this process's environment
/// without launcher variables, plus the entry's), and waits for all of them, at most `deadline`.
inline std::vector<RankOutcome> run_ranks(const std::string& program, const std::vector<std::string>& args,
                                          const std::vector<Environment>& ranks,
                                          std::chrono::seconds deadline = std::chrono::seconds(120)) {
  struct Running {
    pid_t pid = 0;
    int out = -1;
    int err = -1;
    RankOutcome outcome;
  };
  std::vector<Running> running(ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    std::vector<std::string> environment;
    for (char** variable = environ; *variable != nullptr; ++variable) {
      const std::string entry = *variable;
      if (!is_launcher_variable(entry.substr(0, entry.find('=')))) environment.push_back(entry);
    }
    for (const auto& [name, value] : ranks[i]) environment.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (auto& entry : environment) envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::vector<std::string> argument_strings{program};
    argument_strings.insert(argument_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& argument : argument_strings) argv.push_back(argument.data());
    argv.push_back(nullptr);

    int out[2];
    int err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    const int spawned = ::posix_spawn(&running[i].pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    ::close(err[1]);
    if (spawned != 0) throw std::runtime_error("cannot start " + program + ": " + std::strerror(spawned));
    running[i].out = out[0];
    running[i].err = err[0];
  }
  // Read every rank's output as it comes, so that no rank blocks on a full pipe.
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::pair<std::size_t, bool>> owners;  // rank, stderr
    for (std::size_t i = 0; i < running.size(); ++i) {
      if (running[i].out >= 0) {
        fds.push_back({running[i].out, POLLIN, 0});
        owners.emplace_back(i, false);
      }
      if (running[i].err >= 0) {
        fds.push_back({running[i].err, POLLIN, 0});
        owners.emplace_back(i, true);
      }
    }
    if (fds.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      for (auto& rank : running) {
        if (rank.out >= 0 || rank.err >= 0) {
          ::kill(rank.pid, SIGKILL);
          rank.outcome.killed_at_deadline = true;
        }
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(left.count(), 100)));
    if (ready < 0 && errno != EINTR) throw std::runtime_error("poll failed");
    for (std::size_t f = 0; f < fds.size(); ++f) {
      if (fds[f].revents == 0) continue;
      auto& rank = running[owners[f].first];
      int& fd = owners[f].second ? rank.err : rank.out;
      char buffer[4096];
      const ssize_t got = ::read(fd, buffer, sizeof(buffer));
      if (got > 0) {
        (owners[f].second ? rank.outcome.err : rank.outcome.out).append(buffer, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(fd);
        fd = -1;
      }
    }
  }
  std::vector<RankOutcome> outcomes;
  for (auto& rank : running) {
    while (::waitpid(rank.pid, &rank.outcome.status, 0) < 0 && errno == EINTR) {
    }
    outcomes.push_back(std::move(rank.outcome));
  }
  return outcomes;
}

}  // namespace dpipe::testing

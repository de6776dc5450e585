#pragma once
// What a process holds that must not leak: open file descriptors, shared-memory segments in
// /dev/shm, child processes and threads (read from /proc).

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace dpipe::testing {

struct ProcessSnapshot {
  std::set<std::string> descriptors;  // the targets of /proc/self/fd/*
  std::set<std::string> shm;          // the entries of /dev/shm
  std::set<pid_t> children;           // /proc/self/task/*/children
  std::size_t threads = 0;            // the entries of /proc/self/task

  static ProcessSnapshot take() {
    namespace fs = std::filesystem;
    // ThreadSanitizer's runtime starts a thread of its own when the process creates its first
    // one: create that first thread before any snapshot, so both sides of a comparison count it.
    static const bool first_thread_created = [] {
      std::thread([] {}).join();
      return true;
    }();
    (void)first_thread_created;
    ProcessSnapshot snapshot;
    for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
      std::error_code error;
      const auto target = fs::read_symlink(entry.path(), error);
      // The directory iterator's own descriptor is gone by the time it is read.
      if (!error) snapshot.descriptors.insert(entry.path().filename().string() + " -> " + target.string());
    }
    if (fs::exists("/dev/shm")) {
      for (const auto& entry : fs::directory_iterator("/dev/shm")) snapshot.shm.insert(entry.path().string());
    }
    for (const auto& task : fs::directory_iterator("/proc/self/task")) {
      ++snapshot.threads;
      std::ifstream children(task.path() / "children");
      pid_t pid = 0;
      while (children >> pid) snapshot.children.insert(pid);
    }
    return snapshot;
  }
};

}  // namespace dpipe::testing

// Test helpers for store tests that run several processes against one bucket directory
// (store/multiprocess_test.cc, store/file/file_store_test.cc): fork a child, wait for it,
// release children together by closing a pipe, and read fixed-size reports over a pipe.
//
// Fork before the parent starts any thread (a store's workers, an Env's loop): the child
// gets a copy of the forking thread only. Each test runs in its own process under ctest.
// Test-only; every function crashes (WK_CHECK) on a failed system call it cannot recover.
#pragma once

#include <poll.h>
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "base/check.h"

namespace wk::process_testing {

// Runs child() in a forked process, which exits with its return value.
inline pid_t ForkChild(const std::function<int()>& child) {
  pid_t pid = ::fork();
  WK_CHECK(pid >= 0, "fork failed");
  if (pid == 0) ::_exit(child());
  return pid;
}

// The child's exit code, or 128 + the signal that killed it, or -1.
inline int WaitChild(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Blocks until the write end of the pipe whose read end is fd is closed (by the parent).
inline void WaitForRelease(int fd) {
  char c;
  while (::read(fd, &c, 1) < 0 && errno == EINTR) {
  }
}

// One report from a child: who, what step, which outcome (a Code or a sequence number).
struct Report {
  std::int32_t child;
  std::int32_t phase;
  std::int32_t code;
};

// Writes are at most PIPE_BUF bytes, so reports from several children never interleave.
inline void SendReport(int fd, Report r) {
  WK_CHECK(::write(fd, &r, sizeof(r)) == sizeof(r), "report");
}

// The next report, or nullopt if none comes within the timeout (a child died before
// reporting: the others keep the pipe open, so there is no end of file to wait for).
inline std::optional<Report> ReadReport(int fd, int timeout_ms = 30'000) {
  Report r{};
  auto* p = reinterpret_cast<char*>(&r);
  std::size_t got = 0;
  while (got < sizeof(r)) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    ssize_t n = ::read(fd, p + got, sizeof(r) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<std::size_t>(n);
  }
  return r;
}

inline void KillAll(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
  for (pid_t pid : pids) (void)WaitChild(pid);
}

}  // namespace wk::process_testing

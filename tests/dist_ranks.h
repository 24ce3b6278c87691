// Multi-process tests of dist/: ranks are fork()ed children that report through a pipe ("" =
// passed, else what failed); the parent bounds every wait and kills them on a deadline, so a bug
// never hangs the suite. Each test's TCP store is served, on a free port the kernel picks, by a child
// of its own: the parent runs no thread of ours while it forks, so no child starts with a lock that
// a thread held (malloc's under ASan, whose runtime in GCC 12 takes none of its locks across fork).
#pragma once

#include <doctest/doctest.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "dist/gloo_process_group.h"
#include "dist/nccl_process_group.h"
#include "dist/tcp_store.h"

namespace ember_test {

using ember::dist::GlooOptions;
using ember::dist::ProcessGroup;
using ember::dist::TCPStore;
using ember::dist::TCPStoreOptions;
using std::chrono::milliseconds;

inline constexpr milliseconds kRankTimeout(5000);  // each collective in the tests; failures use 2 s

// What a rank reports: "" when everything it checked held, else the first thing that did not.
using RankBody = std::function<std::string(int rank, int world, int store_port)>;

// Forks a child that serves a TCP store until the returned pipe end is closed; returns {its pid,
// that pipe end, the port}.
inline std::tuple<pid_t, int, int> fork_store_server() {
  int port_pipe[2], stop_pipe[2];
  REQUIRE(::pipe(port_pipe) == 0);
  REQUIRE(::pipe(stop_pipe) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(port_pipe[0]);
    ::close(stop_pipe[1]);
    try {
      TCPStore server("127.0.0.1", 0, {true, kRankTimeout});
      const int port = server.port();
      char byte;
      if (::write(port_pipe[1], &port, sizeof(port)) == sizeof(port))
        while (::read(stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
        }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "the tests' store server: %s\n", e.what());
    }
    ::_exit(0);
  }
  ::close(port_pipe[1]);
  ::close(stop_pipe[0]);
  int port = 0;
  const bool started = ::read(port_pipe[0], &port, sizeof(port)) == sizeof(port);
  ::close(port_pipe[0]);
  if (!started) {
    ::close(stop_pipe[1]);
    ::waitpid(pid, nullptr, 0);
  }
  REQUIRE_MESSAGE(started, "the store server did not start");
  return {pid, stop_pipe[1], port};
}

// Forks `world` ranks running body and returns their reports ("<no report> (how it ended)" for a
// rank that exited without one). Kills every rank still running after `limit`.
inline std::vector<std::string> run_ranks(int world, const RankBody& body, milliseconds limit = milliseconds(30000)) {
  std::fflush(nullptr);  // or a child that flushes its output writes this process's pending output again
  const auto [server_pid, server_stop, server_port] = fork_store_server();
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int r = 0; r < world; ++r) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      ::close(server_stop);
      std::string report;
      try {
        report = body(r, world, server_port);
      } catch (const std::exception& e) {
        report = std::string("rank ") + std::to_string(r) + " threw: " + e.what();
      }
#ifdef __SANITIZE_ADDRESS__
      // _exit skips LeakSanitizer's check at exit: a rank looks for its leaks here, its body's objects gone.
      if (report.empty() && __lsan_do_recoverable_leak_check()) report = "leaked (LeakSanitizer's report above)";
#endif
      report = "R" + report;  // a leading mark tells an empty report from none
      if (::write(fds[1], report.data(), report.size()) < 0) ::_exit(2);
      ::_exit(0);  // no destructors or doctest teardown of the parent's state in the child
    }
    ::close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }
  std::vector<std::string> reports(world);
  std::vector<bool> open(world, true);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int left = world; left > 0;) {
    std::vector<pollfd> fds;
    for (int r = 0; r < world; ++r)
      if (open[r]) fds.push_back({pipes[r], POLLIN, 0});
    const int wait_ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now()).count()));
    if (::poll(fds.data(), fds.size(), wait_ms) <= 0) break;
    for (int r = 0; r < world; ++r) {
      if (!open[r]) continue;
      pollfd p{pipes[r], POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(pipes[r], buf, sizeof(buf));
      if (n > 0) {
        reports[r].append(buf, static_cast<size_t>(n));
      } else {
        open[r] = false;
        --left;
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    if (open[r]) {
      ::kill(pids[r], SIGKILL);
      reports[r] = "Rrank " + std::to_string(r) + " was still running after " + std::to_string(limit.count()) + " ms";
    }
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    ::close(pipes[r]);
    const std::string ending = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                   : "exit status " + std::to_string(WEXITSTATUS(status));
    reports[r] = reports[r].empty() ? "<no report> (" + ending + ")" : reports[r].substr(1);
  }
  ::close(server_stop);
  ::waitpid(server_pid, nullptr, 0);
  return reports;
}

inline void check_all_passed(const std::vector<std::string>& reports) {
  for (size_t r = 0; r < reports.size(); ++r) CHECK_MESSAGE(reports[r].empty(), "rank ", r, ": ", reports[r]);
}

inline std::shared_ptr<ProcessGroup> join_group(int rank, int world, int port, milliseconds timeout = kRankTimeout,
                                         bool debug = true) {
  auto store = std::make_shared<TCPStore>("127.0.0.1", port, TCPStoreOptions{false, timeout});
  GlooOptions options;
  options.timeout = timeout;
  options.debug = debug;
  options.master_addr = "127.0.0.1";
  return make_gloo_process_group(store, rank, world, options);
}

// Rank 0 of an NCCL group of `world` ranks on this process's GPU, its store served here (one GPU
// takes one rank: a world above 1 tests a rank that never joins).
inline std::shared_ptr<ProcessGroup> nccl_group(int world, milliseconds timeout, bool debug = true) {
  auto store = std::make_shared<TCPStore>("127.0.0.1", 0, TCPStoreOptions{true, timeout});
  ember::dist::NcclOptions options;
  options.timeout = timeout;
  options.debug = debug;
  return ember::dist::make_nccl_process_group(store, 0, world, options);
}

}  // namespace ember_test

// A case that needs a GPU and NCCL: in the 'cuda' suite, skipped without either.
#define NCCL_TEST_CASE(name) \
  TEST_CASE(name * doctest::test_suite("cuda") * doctest::skip(!ember::dist::has_nccl() || !ember_test::has_cuda()))

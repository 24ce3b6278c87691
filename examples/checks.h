// Checks: how each example of the ladder states what it demonstrates. Every claim is printed with
// its verdict, and one that fails makes the program exit non-zero, so the CI test that runs the
// example fails with it.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include "tensor/error.h"

namespace ember_examples {

class Checks {
 public:
  // verbose = false prints only failures (the ranks of a job but one).
  explicit Checks(bool verbose = true) : verbose_(verbose) {}
  // Prints "[ok] what" or "[FAILED] what" (also on stderr) and remembers a failure.
  bool expect(bool holds, const std::string& what) {
    if (verbose_) std::printf("  [%s] %s\n", holds ? "ok" : "FAILED", what.c_str());
    if (!holds) {
      std::fflush(stdout);  // the verdict above, before the message below
      std::fprintf(stderr, "claim failed: %s\n", what.c_str());
      ++failures_;
    }
    return holds;
  }
  // main's return value: 0 when every claim held, 1 otherwise.
  int exit_code() const {
    if (failures_) std::fprintf(stderr, "%d claim(s) failed\n", failures_);
    return failures_ ? 1 : 0;
  }

 private:
  bool verbose_;
  int failures_ = 0;
};

// The body of an example's main: runs `body` with fresh Checks and returns the exit code; an
// ember::Error it throws is printed after the program's name and fails the run too.
inline int run_checked(const char* program, const std::function<void(Checks&)>& body) {
  Checks checks;
  try {
    body(checks);
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  return checks.exit_code();
}

}  // namespace ember_examples

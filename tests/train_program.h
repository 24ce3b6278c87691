// Running examples/train from a test: the program meson builds, found through EMBER_TRAIN_PROGRAM.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <doctest/doctest.h>

namespace ember_test {

// examples/train, as meson passes it; "" when it was not built.
inline std::string train_program() {
  const char* p = std::getenv("EMBER_TRAIN_PROGRAM");
  return p ? p : "";
}

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs the training program with `args`, its environment extended by `env` ("NAME=value ...").
inline CommandResult run_train(const std::string& args, const std::string& env = "") {
  FILE* pipe = ::popen((env + " " + train_program() + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

}  // namespace ember_test

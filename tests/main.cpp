// The doctest runner shared by every test binary. `--ember-require-cuda` (given by the 'cuda'
// suite in meson) makes a machine without a GPU exit with 77, which meson reports as SKIP.
#define DOCTEST_CONFIG_IMPLEMENT
// No signal handlers: a crashing test kills the binary at once (meson reports the signal). doctest's
// handler allocates while reporting, which deadlocks when the crash happened inside malloc.
#define DOCTEST_CONFIG_NO_POSIX_SIGNALS
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "tests/helpers.h"

int main(int argc, char** argv) {
  std::vector<char*> args;
  bool require_cuda = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--ember-require-cuda") == 0) require_cuda = true;
    else args.push_back(argv[i]);
  }
  if (require_cuda && !ember_test::has_cuda()) {
    std::printf("no CUDA device: the cuda suite is skipped\n");
    return 77;
  }
  doctest::Context context(static_cast<int>(args.size()), args.data());
  context.setOption("no-intro", true);
  return context.run();
}

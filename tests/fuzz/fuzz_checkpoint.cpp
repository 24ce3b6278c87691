// libFuzzer target: the checkpoint loader on arbitrary bytes, and what it loads restored into a
// small run (tests/fuzz/small_run.h), so the values a file holds are checked as counts, positions
// and state, not only parsed. The input is one file: a sharded checkpoint's index, whose shards are
// named relative to it, finds none beside it (fuzz_sharded_checkpoint gives it some).
// `fuzz_checkpoint --write-seed FILE` writes that run's checkpoint after 4 of its 6 steps (mid-epoch,
// with optimizer and scaler state), the corpus's seed.
#include <cstring>

#include "tests/fuzz/fuzz_file.h"
#include "tests/fuzz/small_run.h"
#include "train/checkpoint.h"

using namespace ember;
using fuzz::small_run;

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  for (int i = 1; i + 1 < *argc; ++i)
    if (std::strcmp((*argv)[i], "--write-seed") == 0) {
      small_run().run();
      train::save_checkpoint((*argv)[i + 1], small_run().checkpoint());
      std::exit(0);
    }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ember::fuzz::InputFile file;
  const std::string& path = file.fill(data, size);
  ember::fuzz::expect_clean([&] { small_run().restore(train::load_checkpoint(path)); });
  return 0;
}

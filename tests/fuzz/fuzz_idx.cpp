// libFuzzer target: the IDX reader (Fashion-MNIST's format, plain or gzip) on arbitrary bytes.
#include "data/idx.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ember::fuzz::InputFile file;
  const std::string& path = file.fill(data, size);
  ember::fuzz::expect_clean([&] { ember::data::read_idx(path); });
  return 0;
}

// libFuzzer target: the CIFAR-10 batch reader (plain or gzip) on arbitrary bytes.
#include "data/cifar10.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ember::fuzz::InputFile file;
  const std::string& path = file.fill(data, size);
  ember::fuzz::expect_clean([&] { ember::data::read_cifar10(path); });
  return 0;
}

// libFuzzer target: load_safetensors on arbitrary bytes (tools/fuzz.sh runs it).
#include "tensor/safetensors.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ember::fuzz::InputFile file;
  const std::string& path = file.fill(data, size);
  ember::fuzz::expect_clean([&] { ember::load_safetensors(path); });
  return 0;
}

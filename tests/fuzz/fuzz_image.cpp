// libFuzzer target: image files (JPEG and PNG) on arbitrary bytes, through the whole per-image
// pipeline: the header, the crop box, the decode at the scale the box allows, the resampling.
#include <vector>

#include "data/image_transform.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  std::vector<float> out(3 * 32 * 32);
  for (const bool train : {true, false}) {
    ember::data::ImageTransformOptions o;
    o.train = train;
    o.size = 32;
    o.resize = 36;
    ember::data::RandomStream rs(size, 0);
    ember::fuzz::expect_clean([&] {
      ember::data::transform_image(bytes, "input", o, rs, {out.data(), ember::DType::f32, 32 * 32, 32, 1});
    });
  }
  return 0;
}

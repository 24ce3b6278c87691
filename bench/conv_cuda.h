// bench_conv's GPU cases: ember's conv2d passes against cuDNN called directly, for every
// precision, layout and the given batch sizes. CUDA builds with cuDNN only; registers nothing
// when no GPU is visible.
#pragma once

#include <cstdint>
#include <vector>

namespace bench {

void register_cuda_conv_cases(const std::vector<int64_t>& batches);

}  // namespace bench

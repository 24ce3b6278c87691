// The input window of average pooling's output (i, j), clipped to the input, and its divisor: one
// definition for the CPU and CUDA kernels (PyTorch's AvgPool2d / AdaptiveAvgPool2d windows).
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor/half.h"  // EMBER_HD

namespace ember {

struct AvgPoolWindow {
  int64_t h0, h1, w0, w1, divisor;
};

// `p` has kernel, stride, padding (indexable pairs), count_include_pad, divisor_override (0: none)
// and adaptive; `s` has the input and output plane sizes H, W, OH, OW. A divisor of 0 (a window
// wholly in the padding, not counted) makes the output 0.
template <class Params, class Sizes>
EMBER_HD AvgPoolWindow avg_pool_window(const Params& p, const Sizes& s, int64_t i, int64_t j) {
  if (p.adaptive) {
    const int64_t h0 = i * s.H / s.OH, h1 = ((i + 1) * s.H + s.OH - 1) / s.OH;
    const int64_t w0 = j * s.W / s.OW, w1 = ((j + 1) * s.W + s.OW - 1) / s.OW;
    return {h0, h1, w0, w1, (h1 - h0) * (w1 - w0)};
  }
  int64_t h0 = i * p.stride[0] - p.padding[0], w0 = j * p.stride[1] - p.padding[1];
  int64_t h1 = std::min(h0 + p.kernel[0], s.H + p.padding[0]), w1 = std::min(w0 + p.kernel[1], s.W + p.padding[1]);
  const int64_t padded = (h1 - h0) * (w1 - w0);  // the divisor counting padding
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, s.H);
  w1 = std::min(w1, s.W);
  const int64_t divisor = p.divisor_override != 0 ? p.divisor_override
                         : p.count_include_pad  ? padded
                                                : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, divisor};
}

}  // namespace ember

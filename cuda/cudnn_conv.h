// conv2d's three directions through cuDNN's convolution API (cudnn_cnn.h) on the current device's
// current stream. The algorithm comes from a cache per problem, filled on a miss by cuDNN's
// heuristics or, in benchmark mode, by timing the candidates on the real buffers (tensor/cuda_settings.h).
#pragma once

#include "nn/primitives/conv.h"

namespace ember::cuda {

enum class ConvDirection { forward, backward_data, backward_filter };

// x (N, C, H, W), w (O, C/groups, kh, kw) and y (N, O, OH, OW): non-empty NCHW-shaped tensors of one
// floating dtype on the current device, each dense in NHWC order when `nhwc` (the filter then
// (O, kh, kw, C/groups) in memory), in NCHW order otherwise. forward writes y = conv(x, w);
// backward_data writes x, the input gradient for output gradient y; backward_filter writes w.
void cudnn_convolution(ConvDirection direction, const Tensor& x, const Tensor& w, const Tensor& y, bool nhwc,
                       const Conv2dParams& p);

}  // namespace ember::cuda

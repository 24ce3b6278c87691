// Launchers of the pooling kernels (cuda/pooling.cu), called by cuda/pooling.cpp: one thread per
// output element, math in f32 (f64 for f64), the strided operand read through its strides, every
// output written NCHW-contiguous. Each runs on `stream` of the current device.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "tensor/dtype.h"

namespace ember::cuda {

// One pooling: input planes (N, C, H, W), output planes (OH, OW), the windows as in
// nn/primitives/pooling.h's Pool2dParams, and the element strides (n, c, h, w) of the operand read
// (the input forward, grad_output backward).
struct PoolShape {
  int64_t N, C, H, W, OH, OW;
  int64_t strides[4];
  int64_t kernel[2], stride[2], padding[2], dilation[2];
  bool count_include_pad, adaptive;
  int64_t divisor_override;
};

// values and indices (h * W + w within the plane) of max pooling x.
void launch_max_pool2d(DType dtype, const void* x, void* values, int64_t* indices, const PoolShape& s,
                       cudaStream_t stream);
// y = the window means of x (regular or adaptive).
void launch_avg_pool2d(DType dtype, const void* x, void* y, const PoolShape& s, cudaStream_t stream);
// grad_in (N, C, H, W) = average pooling's input gradient for grad_out (N, C, OH, OW).
void launch_avg_pool2d_backward(DType dtype, const void* grad_out, void* grad_in, const PoolShape& s,
                                cudaStream_t stream);

}  // namespace ember::cuda

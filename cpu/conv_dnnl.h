// conv2d's three passes through oneDNN (dnnl.hpp), as PyTorch's CPU conv runs them: cpu/conv_dnnl.cpp
// when Meson finds libdnnl (option dnnl), else cpu/conv_without_dnnl.cpp, which declines every call.
// cpu/conv.cpp calls these first and falls back to ember's own kernel.
#pragma once

#include "nn/primitives/conv.h"

namespace ember::cpu {

// Each runs one pass on NCHW-shaped tensors read and written through their strides (NCHW or
// channels-last), and returns false, touching nothing, where oneDNN has no fast kernel: dtypes
// other than f32 and, on CPUs with avx512_bf16, bf16; geometries only its reference code takes.
// y and gx: the pass's whole output, overwritten; gw: dense (O, C/groups, kH, kW).
bool dnnl_conv_forward(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p);
bool dnnl_conv_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dParams& p);
bool dnnl_conv_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dParams& p);

}  // namespace ember::cpu

// dst = src converted to dst's dtype, src broadcast to dst's shape, for any dtype pair: the CPU
// kernel of casts and copies (cpu/elementwise.cpp), which kernels computing a 16-bit result in f32
// use to narrow it (dense f32 -> f16 runs on F16C).
#pragma once

#include "tensor/tensor.h"

namespace ember::cpu {

void convert_into(const Tensor& dst, const Tensor& src);

}  // namespace ember::cpu

// Host-side helpers shared by the eval_cuda definitions in cuda/*.cpp: strided operand packing and
// a converting, broadcasting copy between CUDA tensors.
#pragma once

#include <array>

#include "cuda/context.h"
#include "cuda/kernels.h"
#include "tensor/tensor.h"

namespace ember::cuda {

// `out` and `inputs` broadcast to out's shape, dims coalesced where every operand allows it.
template <int N>
Strided<N> make_strided(const Tensor& out, const std::array<const Tensor*, N - 1>& inputs);

// dst = src broadcast to dst's shape and converted to dst's dtype (both on dst's device).
void convert_into(const Tensor& dst, const Tensor& src);

}  // namespace ember::cuda

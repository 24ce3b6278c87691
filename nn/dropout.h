/// @file
/// Functional dropout: zeroes elements with probability p from the Philox stream, scales the rest.
#pragma once

#include "tensor/ops.h"

namespace ember {

/// Element i is kept when u_i >= p, u = rand(input.shape(), f32, gen) (the same draws and the same
/// generator advance as that rand call), and kept elements are scaled by 1 / (1 - p). Returns
/// input itself when p == 0 or !training, zeros when p == 1; p outside [0, 1] is a ValueError.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, Generator* gen = nullptr);

}  // namespace ember

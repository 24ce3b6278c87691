/// @file
/// Functional batch norm and layer norm (torch.nn.functional semantics and defaults).
#pragma once

#include "tensor/ops.h"

namespace ember {

/// Batch norm of x (N, C, ...) per channel. training: normalise with the batch statistics (biased
/// variance) and, when running_mean / running_var are defined, update them in place (no grad) as
/// running = (1 - momentum) * running + momentum * batch, with the unbiased batch variance.
/// Eval: normalise with the running statistics (then required). weight / bias may be undefined.
/// 16-bit x takes f32 (or same-dtype) weight, bias and statistics. Channels-last x is read in place.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

/// Layer norm over the trailing dims `normalized_shape`; weight / bias (that shape) may be undefined.
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

}  // namespace ember

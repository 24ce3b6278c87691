// Gradient clipping over a list of parameters (PyTorch's torch.nn.utils.clip_grad_norm_ and
// clip_grad_value_). Parameters without a gradient are ignored.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ember::optim {

// The norm_type-norm of all gradients together, as one vector (infinity: max |g|); 0 when no
// parameter has a gradient. ValueError for norm_type <= 0.
double grad_norm(const std::vector<Tensor>& params, double norm_type = 2.0);

// Scales every gradient by min(1, max_norm / (total + 1e-6)), total being the norm_type-norm of
// all gradients together (norm_type = infinity: max |g|). Returns total as a host double (0 when no
// parameter has a gradient). A non-finite total leaves the gradients untouched and is returned as is
// (the caller skips the step), or raises ValueError when error_if_nonfinite.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps every gradient element to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace ember::optim

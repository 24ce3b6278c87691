/// @file
/// Gradient clipping over a list of parameters (PyTorch's torch.nn.utils.clip_grad_norm_ and
/// clip_grad_value_), and the total gradient norm they use. Parameters without a gradient are ignored.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ember::optim {

/// The norm_type-norm of all gradients together, as one vector (infinity: max |g|), computed on the
/// parameters' device by one multi-tensor kernel, without a host read: a 0-dim tensor there, float32
/// (float64 when a gradient is float64); 0 when no parameter has a gradient. ValueError for
/// norm_type <= 0.
Tensor total_grad_norm(const std::vector<Tensor>& params, double norm_type = 2.0);

/// True where x is finite (a bool tensor on x's device, computed there: no host read).
Tensor is_finite(const Tensor& x);

/// Sets `first` (a 0-dim int32 tensor) to min(first, slot) when an element of `tensors` (on first's
/// device) is a NaN or an infinity, on the device: numbering checks in the order they run, first
/// ends as the first check that saw one, and nothing waits. Each tensor is read once, in place when
/// its elements fill a block of memory in any order (broadcast dims read once), else after a copy;
/// tensors that are not floating are passed over.
void mark_first_nonfinite(const Tensor& first, int32_t slot, const std::vector<Tensor>& tensors);

/// Scales every gradient by min(1, max_norm / (total + 1e-6)) on the device, total being
/// total_grad_norm(params, norm_type), and returns total. A non-finite total leaves the gradients
/// untouched (the caller skips the step). No host read, except with error_if_nonfinite: then the
/// total is read on the host (a synchronisation) and a non-finite one raises ValueError.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// The scaling of clip_grad_norm_ for a total computed already (over several processes, say).
void clip_grads_to_norm_(const std::vector<Tensor>& params, const Tensor& total, double max_norm);

/// Clamps every gradient element to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace ember::optim

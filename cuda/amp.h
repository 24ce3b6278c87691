// Launchers of the loss-scaling kernels (cuda/amp.cu), called by cuda/amp.cpp. Each runs on
// `stream` of the current device and reads its scalars from device memory.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cuda/multi_tensor.h"
#include "optim/amp/scale_rules.h"

namespace ember::cuda {

// Operand 0 of every tensor of `l` (dtype `dtype`) multiplied by *inv_scale; *found_inf = 1 when an
// element read was not finite.
void launch_amp_unscale(DType dtype, const TensorList& l, const float* inv_scale, float* found_inf,
                        cudaStream_t stream);
// *first = min(*first, slot) when an element of operand 0 of a tensor of `l` (dtype `dtype`) is not
// finite; nothing is read when *first <= slot already.
void launch_first_nonfinite(DType dtype, const TensorList& l, int32_t slot, int32_t* first, cudaStream_t stream);
// Operand 0 (f32 masters) of every tensor of `l` copied into operand 1 (`dtype`) by
// amp::copy_back_element, unless *found_inf is nonzero.
void launch_master_copy_back(DType dtype, const TensorList& l, const float* found_inf, const amp::CopyBackRule& rule,
                             cudaStream_t stream);
// amp::update_grad_scale on *scale and *growth_tracker from *found_inf.
void launch_grad_scale_update(float* scale, int32_t* growth_tracker, const float* found_inf,
                              const amp::GradScalerRule& rule, cudaStream_t stream);
// amp::update_loss_scale on *scale and the counters from *found_inf.
void launch_loss_scale_update(float* scale, amp::LossScalerCounters* counters, const float* found_inf,
                              const amp::LossScalerRule& rule, cudaStream_t stream);

}  // namespace ember::cuda

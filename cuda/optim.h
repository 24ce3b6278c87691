// Launchers of the multi-tensor kernels of the optimizer steps and of the total gradient norm
// (cuda/optim.cu), called by cuda/optim.cpp. One launch covers up to TensorList::kMaxTensors tensors
// of one dtype, a block per kStepChunk elements. Each runs on `stream` of the current device.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cuda/multi_tensor.h"
#include "optim/step_math.h"
#include "tensor/dtype.h"

namespace ember::cuda {


// The device scalars of a step: found_inf nonzero skips the step, every gradient is divided by
// grad_scale (either may be null), and `scheduled` replaces the hyperparameters' lr and momentum or beta1.
struct StepScalars {
  const float* found_inf;
  const float* grad_scale;
  const double* scheduled;  // {lr, momentum or beta1} (optim::with_scheduled)
};

// Operands per tensor {p, grad, momentum_buffer (null without momentum)}; the step count is 0 on
// the first step.
void launch_sgd_step(DType dtype, const TensorList& l, const optim::SGDStepParams& h, StepScalars s,
                     cudaStream_t stream);
// Operands {p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (null without amsgrad)}.
void launch_adam_step(DType dtype, const TensorList& l, const optim::AdamStepParams& h, StepScalars s,
                      cudaStream_t stream);
// Operands {p, grad, exp_avg, exp_avg_sq}; `scratch` holds 2 * l.chunks() + l.count doubles
// (per-chunk sums of squares, then each tensor's trust ratio). Three launches: moments and sums,
// trust ratios, update.
void launch_lamb_step(DType dtype, const TensorList& l, const optim::LAMBStepParams& h, StepScalars s,
                      double* scratch, cudaStream_t stream);
// Adds 1 to each tensor's step count unless found_inf (may be null) is nonzero. Launched after the
// step's kernels, which read the count before it moves.
void launch_advance_steps(const TensorList& l, const float* found_inf, cudaStream_t stream);

// partials[c] = the norm partial (optim::norm_term folded by norm_combine) of chunk c of the
// list's operand 0.
void launch_norm_partials(DType dtype, const TensorList& l, double norm_type, double* partials, cudaStream_t stream);
// *out (f32 or f64) = the norm from n partials combined in order.
void launch_norm_finish(DType out_dtype, const double* partials, int64_t n, double norm_type, void* out,
                        cudaStream_t stream);

}  // namespace ember::cuda

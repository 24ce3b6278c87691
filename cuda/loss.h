// Launchers of the fused cross-entropy kernels (cuda/loss.cu); host logic in cuda/loss.cpp.
// "A" below is the type the kernels compute in: float for f32/f16/bf16, double for f64.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cuda/context.h"
#include "tensor/dtype.h"

namespace ember::cuda {

enum class LossReduction { none, mean, sum };

// The most blocks a cross-entropy kernel runs: the size of the per-block partials of a sum or mean.
inline constexpr int64_t kCrossEntropyMaxBlocks = 1024;

// logits (N, C, S) and target (N, S) contiguous; position p = n * S + i has class c at
// logits[(n * C + c) * S + i]. A target outside [0, C) other than ignore_index is reported through
// `errors` (IndexError at the next synchronisation) and gives a NaN loss.
struct CrossEntropyArgs {
  int64_t N = 0, C = 0, S = 0;
  const void* logits = nullptr;
  const void* target = nullptr;
  DType target_dtype = DType::i64;  // i64 or i32
  LossReduction reduction = LossReduction::mean;
  int64_t ignore_index = -100;
  double label_smoothing = 0;
  const void* g = nullptr;  // backward: the output's cotangent, logits' dtype (N * S values for none, else 1)
  void* out = nullptr;      // forward: the losses (N * S) or their sum / mean (1); backward: dlogits
  void* partial_loss = nullptr;   // A (kCrossEntropyMaxBlocks): forward sum / mean
  void* partial_count = nullptr;  // int64 (kCrossEntropyMaxBlocks): forward sum / mean; backward mean: 1
  KernelErrorSlot* errors = nullptr;
};

void launch_cross_entropy(DType dtype, const CrossEntropyArgs& a, cudaStream_t stream);
void launch_cross_entropy_backward(DType dtype, const CrossEntropyArgs& a, cudaStream_t stream);

}  // namespace ember::cuda

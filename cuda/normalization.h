// Launchers of the batch-norm and layer-norm kernels (cuda/normalization.cu); the host logic that
// fills their arguments is in cuda/normalization.cpp. "A" below is the type the kernels compute in,
// float for f32/f16/bf16 and double for f64 (the primitives' stat_dtype): every per-channel or
// per-column vector they read or write (parameters, statistics, workspace) holds A values.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cuda/launch_config.h"
#include "tensor/dtype.h"

namespace ember::cuda {

// The strides, in elements, of an operand seen as (N, C, S): element (n, c, i) lies at
// n * strides.n + c * strides.c + i * strides.s.
struct ChannelStrides {
  int64_t n = 0, c = 0, s = 1;
};

// The cut for the current device: `columns` when neighbouring channels are neighbours in memory
// (channels-last), so that a warp reads 32 channels at once; else a block walks one channel.
ChannelReduction plan_channel_reduction(int64_t N, int64_t C, int64_t S, bool columns);
// A values of workspace a ChannelReduction's partials take (two per split and channel).
inline int64_t partials_size(const ChannelReduction& r) { return 2 * r.splits * r.C; }

// x, g and out (N, C, S) with their strides; per-channel vectors A (C), null where absent.
struct BatchNormArgs {
  ChannelReduction plan;  // over x (training statistics, backward sums)
  bool training = true;
  double eps = 1e-5;
  const void* x = nullptr;
  ChannelStrides x_strides;
  const void* g = nullptr;  // backward: the cotangent of y
  ChannelStrides g_strides;
  void* out = nullptr;  // y, or dx in backward
  ChannelStrides out_strides;
  bool out_channels_last = false;  // out's memory order: (N, S, C) rather than (N, C, S)
  const void* weight = nullptr;    // A (C); null: 1
  const void* bias = nullptr;      // A (C); null: 0 (forward only)
  const void* running_mean = nullptr, *running_var = nullptr;  // A (C), eval
  const void* g_mean = nullptr, *g_var = nullptr;  // A (C), training backward: the statistics' cotangents
  void* mean = nullptr, *var = nullptr;  // A (C), training forward: batch mean and biased variance
  void* dweight = nullptr, *dbias = nullptr;  // A (C), backward
  void* workspace = nullptr;  // A: partials_size(plan) + kBatchNormWorkspaceChannels * C
};
inline constexpr int64_t kBatchNormWorkspaceChannels = 5;

// y = (x - mean) / sqrt(var + eps) * weight + bias with the batch statistics (training: also
// written to mean and var) or the running ones (eval).
void launch_batch_norm(DType dtype, const BatchNormArgs& a, cudaStream_t stream);
// dx, dweight, dbias of batch_norm as BatchNormBackward defines them (g_mean, g_var included).
void launch_batch_norm_backward(DType dtype, const BatchNormArgs& a, cudaStream_t stream);

// x, g and out contiguous (rows, D); weight and bias A (D) or null.
struct LayerNormArgs {
  int64_t rows = 0, D = 0;
  double eps = 1e-5;
  const void* x = nullptr;
  const void* g = nullptr;  // backward
  void* out = nullptr;      // y, or dx in backward
  const void* weight = nullptr, *bias = nullptr;
  void* dweight = nullptr, *dbias = nullptr;  // A (D), backward
  ChannelReduction columns;  // backward: dweight and dbias, columns summed over rows
  void* workspace = nullptr;  // backward, A: 2 * rows + partials_size(columns)
};

void launch_layer_norm(DType dtype, const LayerNormArgs& a, cudaStream_t stream);
void launch_layer_norm_backward(DType dtype, const LayerNormArgs& a, cudaStream_t stream);

}  // namespace ember::cuda

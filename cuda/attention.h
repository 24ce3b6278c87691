// Launchers of the fused attention kernels (cuda/attention.cu); host logic in cuda/attention.cpp.
// "A" below is the type the kernels compute in: float for f32/f16/bf16, double for f64.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "cuda/launch_config.h"
#include "tensor/dtype.h"
#include "tensor/philox.h"
#include "tensor/shape.h"

namespace ember::cuda {

// q (N, L, E), k (N, S, E), v (N, S, Ev), out and g (N, L, Ev) contiguous, of the dtype launched;
// stats (N, L, 2: each row's max score and sum of weights), d (N, L) and dq_accum (N, L, E) of A.
struct AttentionArgs {
  int64_t N = 0, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1;
  bool causal = false;
  // attn_mask, or null: element (n, i, j) at mask[offset(n) + i * mask_sl + j * mask_ss], offset(n)
  // from n's digits over the mask's batch dims (the last fastest), as cpu/attention.cpp's RowMask.
  const void* mask = nullptr;
  bool mask_bool = false;  // bool (false: masked out), else added to the scores (the inputs' dtype)
  int mask_dims = 0;
  int64_t mask_sizes[ember::kMaxDims] = {}, mask_strides[ember::kMaxDims] = {};
  int64_t mask_sl = 0, mask_ss = 0;
  // Dropout of the weights: (n, i, j) is kept iff rand()'s f32 for flat index (n L + i) S + j drawn
  // at `counter` is >= dropout_p; kept weights are scaled by dropout_scale = 1 / (1 - p).
  float dropout_p = 0;
  double dropout_scale = 1;
  philox::Counter counter;  // its base (a captured step's) is read on the device
  bool vector_loads = false;  // every row of q, k, v, out, g starts 16-byte aligned
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void* out = nullptr;       // forward: written; backward: read
  void* stats = nullptr;     // forward: written; backward: read
  const void* g = nullptr;   // backward
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;  // backward: written
  void* dq_accum = nullptr;  // backward: A (N, L, E), summed into with atomics (may be dq itself when T = A)
  void* d = nullptr;         // backward: A (N, L), rowsum(g * out)
};

// Dynamic shared memory one block of the kernel takes.
size_t attention_shared_bytes(DType dtype, int64_t E, int64_t Ev, bool backward);
// The forward: out and stats.
void launch_attention_forward(DType dtype, const AttentionArgs& a, cudaStream_t stream);
// The backward: d, then dq_accum (zeroed here) and dk, dv, then dq from dq_accum when they differ.
void launch_attention_backward(DType dtype, const AttentionArgs& a, cudaStream_t stream);

}  // namespace ember::cuda

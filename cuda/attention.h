// Launchers of the fused attention kernels (cuda/attention.cu); host logic in cuda/attention.cpp.
// "A" below is the type the kernels compute in: float for f32/f16/bf16, double for f64.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "tensor/dtype.h"
#include "tensor/philox.h"
#include "tensor/shape.h"

namespace ember::cuda {

// A block takes kAttentionQueryTile query rows (16 per warp) and walks key tiles of
// attention_key_tile(bytes of T) keys; head dims up to kAttentionMaxHead, padded to 16 in shared memory.
inline constexpr int kAttentionWarps = 4;
inline constexpr int kAttentionThreads = 32 * kAttentionWarps;
inline constexpr int kAttentionQueryTile = 16 * kAttentionWarps;
inline constexpr int64_t kAttentionMaxHead = 128;
// 64 keys for 16-bit inputs, 32 for f32, 16 for f64: tiles of comparable bytes.
EMBER_HD constexpr int attention_key_tile(int bytes) { return 128 / bytes; }

// Where each tile lies in a block's dynamic shared memory (byte offsets, each 128-aligned) and its
// leading dimension in elements. One plan serves the launch (its size) and the kernel (its offsets).
// Forward: q (Br x ld_qk), k (Bc x ld_qk), v (Bc x ld_v) of T; s (Br x ld_s) of A, the scores;
// p (Br x ld_p) of T, the weights; o (Br x ld_o) of A, the unnormalised output; m, l (Br) of A.
// Backward: k, v, q and g (Br x ld_v, the output's cotangent) of T; s and dp (Br x ld_s) of A, which
// later hold dq's tile (Br x ld_o, ld_o = max(E16, Ev16) + pad) and at the end dk's and dv's (Bc x ld_o);
// p (the weights after dropout) and ds (Br x ld_p) of T; lse and d (Br) of A.
struct AttentionPlan {
  int e16 = 0, ev16 = 0, bc = 0;
  int ld_qk = 0, ld_v = 0, ld_s = 0, ld_p = 0, ld_o = 0;
  size_t q = 0, k = 0, v = 0, g = 0, s = 0, dp = 0, p = 0, ds = 0, o = 0, m = 0, l = 0, lse = 0, d = 0, bytes = 0;
};

// Bytes rounded up to whole 128-byte lines, and the bytes of n rows of ld elements of `size` bytes.
EMBER_HD constexpr size_t attention_lines(size_t bytes) { return (bytes + 127) / 128 * 128; }
EMBER_HD constexpr size_t attention_rows(int n, int ld, int size) {
  return attention_lines(static_cast<size_t>(n) * static_cast<size_t>(ld) * static_cast<size_t>(size));
}

// Places `bytes` at offset `at`, which moves past them; returns where they begin.
EMBER_HD constexpr size_t attention_take(size_t& at, size_t bytes) {
  const size_t here = at;
  at += bytes;
  return here;
}

// The plan for a storage type of t bytes and a compute type of a bytes.
EMBER_HD constexpr AttentionPlan attention_plan(int t, int a, int64_t E, int64_t Ev, bool backward) {
  AttentionPlan p;
  p.e16 = static_cast<int>((E + 15) / 16 * 16);
  p.ev16 = static_cast<int>((Ev + 15) / 16 * 16);
  p.bc = attention_key_tile(t);
  const int br = kAttentionQueryTile;
  // 16 bytes of padding per row: rows start in other banks, and WMMA's ldm stays a multiple of 16 bytes.
  p.ld_qk = p.e16 + 16 / t;
  p.ld_v = p.ev16 + 16 / t;
  p.ld_p = p.bc + 16 / t;
  p.ld_s = p.bc + 16 / a;
  size_t at = 0;
  if (!backward) {
    p.ld_o = p.ev16 + 16 / a;
    p.q = attention_take(at, attention_rows(br, p.ld_qk, t));
    p.k = attention_take(at, attention_rows(p.bc, p.ld_qk, t));
    p.v = attention_take(at, attention_rows(p.bc, p.ld_v, t));
    p.s = attention_take(at, attention_rows(br, p.ld_s, a));
    p.p = attention_take(at, attention_rows(br, p.ld_p, t));
    p.o = attention_take(at, attention_rows(br, p.ld_o, a));
    p.m = attention_take(at, attention_rows(br, 1, a));
    p.l = attention_take(at, attention_rows(br, 1, a));
  } else {
    p.ld_o = (p.e16 > p.ev16 ? p.e16 : p.ev16) + 16 / a;
    p.k = attention_take(at, attention_rows(p.bc, p.ld_qk, t));
    p.v = attention_take(at, attention_rows(p.bc, p.ld_v, t));
    p.q = attention_take(at, attention_rows(br, p.ld_qk, t));
    p.g = attention_take(at, attention_rows(br, p.ld_v, t));
    // s and dp, then (once ds is made) dq's tile, then dk's and dv's: one region, as large as the largest
    const size_t scores = attention_rows(br, p.ld_s, a);
    size_t region = 2 * scores;
    if (attention_rows(br, p.ld_o, a) > region) region = attention_rows(br, p.ld_o, a);
    if (attention_rows(p.bc, p.ld_o, a) > region) region = attention_rows(p.bc, p.ld_o, a);
    p.s = p.o = attention_take(at, region);
    p.dp = p.s + scores;
    p.p = attention_take(at, attention_rows(br, p.ld_p, t));
    p.ds = attention_take(at, attention_rows(br, p.ld_p, t));
    p.lse = attention_take(at, attention_rows(br, 1, a));
    p.d = attention_take(at, attention_rows(br, 1, a));
  }
  p.bytes = at;
  return p;
}

// q (N, L, E), k (N, S, E), v (N, S, Ev), out and g (N, L, Ev) contiguous, of the dtype launched;
// lse and d (N, L) and dq_accum (N, L, E) of A.
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
  void* lse = nullptr;       // forward: written; backward: read
  const void* g = nullptr;   // backward
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;  // backward: written
  void* dq_accum = nullptr;  // backward: A (N, L, E), summed into with atomics (may be dq itself when T = A)
  void* d = nullptr;         // backward: A (N, L), rowsum(g * out)
};

// Dynamic shared memory one block of the kernel takes.
size_t attention_shared_bytes(DType dtype, int64_t E, int64_t Ev, bool backward);
// The forward: out and lse.
void launch_attention_forward(DType dtype, const AttentionArgs& a, cudaStream_t stream);
// The backward: d, then dq_accum (zeroed here) and dk, dv, then dq from dq_accum when they differ.
void launch_attention_backward(DType dtype, const AttentionArgs& a, cudaStream_t stream);

}  // namespace ember::cuda

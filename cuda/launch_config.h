// The launch arithmetic of ember's CUDA kernels: grid sizes, how reductions split their rows, and
// fused attention's shared-memory plan. Free of CUDA headers, so that a build without CUDA tests it
// too (tests/test_launch_config.cpp): a wrong grid or budget shows up on any machine, not first on a GPU.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tensor/half.h"  // EMBER_HD

namespace ember::cuda {

// The most blocks a grid's y (and z) may have.
inline constexpr int64_t kMaxGridY = 65535;
// Threads per block of the grid-stride kernels (and the launch bound they are compiled for).
inline constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items with `threads` per block on a device of `sm_count`
// multiprocessors of `max_threads_per_sm` threads: two waves of resident blocks at most (the loop
// covers the rest), at least one (an empty launch is skipped by the launchers, never sized here).
constexpr unsigned grid_blocks_for(int64_t n, int threads, int sm_count, int max_threads_per_sm) {
  const int64_t wave = int64_t{sm_count} * (max_threads_per_sm / threads) * 2;
  const int64_t needed = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(needed, wave)));
}

// ---- reductions over (outer, len, inner): cuda/reduce.cu

// How launch_reduce cuts len: `splits` blocks fold consecutive chunks of it for each output, and a
// second kernel merges their partials in split order (deterministic), so that few outputs over long
// rows (a bias gradient: 768 sums over 25,000 rows) still fill the device. One split when the outputs
// alone do.
struct ReducePlan {
  int64_t chunk = 1, splits = 1;
};
// Threads of a row when inner == 1: a warp, or the whole block for long rows.
constexpr int reduce_row_group(int64_t len) { return len >= 1024 ? kThreads : 32; }
// Blocks of kReduceColumnLanes x kReduceColumnRows threads fold the columns when inner > 1.
inline constexpr int kReduceColumnLanes = 32, kReduceColumnRows = kThreads / kReduceColumnLanes;

constexpr ReducePlan plan_reduce_for(int64_t outer, int64_t len, int64_t inner, int sm_count, int max_threads_per_sm) {
  ReducePlan plan;
  plan.chunk = std::max<int64_t>(len, 1);
  if (outer * inner == 0 || len == 0) return plan;
  // The blocks the outputs alone give, and the threads that fold each output's len.
  const int64_t threads_per_output = inner == 1 ? reduce_row_group(len) : kReduceColumnRows;
  const int64_t output_blocks = inner == 1 ? (outer * threads_per_output + kThreads - 1) / kThreads
                                           : (outer * inner + kReduceColumnLanes - 1) / kReduceColumnLanes;
  // Enough splits to fill the device once, with at least 16 elements for each thread of a split.
  const int64_t wave = int64_t{sm_count} * (max_threads_per_sm / kThreads);
  const int64_t min_chunk = threads_per_output * 16;
  const int64_t splits = std::clamp<int64_t>(
      std::min((wave + output_blocks - 1) / output_blocks, (len + min_chunk - 1) / min_chunk), 1, kMaxGridY);
  plan.chunk = (len + splits - 1) / splits;
  plan.splits = (len + plan.chunk - 1) / plan.chunk;  // no empty split
  return plan;
}

// ---- per-channel reductions of batch and layer norm: cuda/normalization.cu

// How a per-channel reduction over (N, C, S) is cut: blocks of bx * by threads, grid
// (ceil(C / bx), splits); block (x, k) folds m = n * S + i in [k * chunk, (k + 1) * chunk) for
// channels x * bx + threadIdx.x, leaving one partial per (split, channel) that a second kernel
// merges in split order (deterministic).
struct ChannelReduction {
  int64_t N = 0, C = 0, S = 0;
  int64_t chunk = 1, splits = 1;
  int bx = 1, by = 1;
};
// The cut on a device of `sm_count` multiprocessors: `columns` when neighbouring channels are
// neighbours in memory (channels-last), so that a warp reads 32 channels at once; else a block walks
// one channel.
constexpr ChannelReduction plan_channel_reduction_for(int64_t N, int64_t C, int64_t S, bool columns, int sm_count,
                                                      int max_threads_per_sm) {
  ChannelReduction r;
  r.N = N;
  r.C = C;
  r.S = S;
  r.bx = columns ? 32 : 1;
  r.by = kThreads / r.bx;
  // Enough splits to fill the device once, but at least 16 elements for each thread of a block.
  const int64_t wave = int64_t{sm_count} * (max_threads_per_sm / kThreads);
  const int64_t channel_blocks = std::max<int64_t>(1, (C + r.bx - 1) / r.bx);
  const int64_t M = N * S, min_chunk = int64_t{r.by} * 16;
  const int64_t splits = std::clamp<int64_t>(
      std::min((wave + channel_blocks - 1) / channel_blocks, (M + min_chunk - 1) / min_chunk), 1, kMaxGridY);
  r.chunk = std::max<int64_t>(1, (M + splits - 1) / splits);
  r.splits = std::max<int64_t>(1, (M + r.chunk - 1) / r.chunk);  // no empty split
  return r;
}

// ---- fused attention: cuda/attention.cu

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
// p (the weights after dropout) and ds (Br x ld_p) of T; m, l (the row max and 1 / sum) and d (Br) of A.
struct AttentionPlan {
  int e16 = 0, ev16 = 0, bc = 0;
  int ld_qk = 0, ld_v = 0, ld_s = 0, ld_p = 0, ld_o = 0;
  size_t q = 0, k = 0, v = 0, g = 0, s = 0, dp = 0, p = 0, ds = 0, o = 0, m = 0, l = 0, d = 0, bytes = 0;
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
    p.m = attention_take(at, attention_rows(br, 1, a));
    p.l = attention_take(at, attention_rows(br, 1, a));
    p.d = attention_take(at, attention_rows(br, 1, a));
  }
  p.bytes = at;
  return p;
}

}  // namespace ember::cuda

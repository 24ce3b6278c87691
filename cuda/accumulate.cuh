// How the norm and loss kernels accumulate: in float for f32/f16/bf16 and double for f64, and over
// a warp or a whole block with a sum or max that leaves the same value in every thread, combined in
// a fixed order so that results do not depend on scheduling. Included by cuda/*.cu only.
#pragma once

#include <type_traits>

#include "cuda/loops.cuh"

namespace ember::cuda {

// The type the kernels compute in for storage type T (the primitives' stat_dtype).
template <class T>
using float_acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// x widened to A.
template <class A, class T>
__device__ __forceinline__ A load_as(T x) {
  return static_cast<A>(static_cast<compute_t<T>>(x));
}

struct AddOp {
  template <class V>
  __device__ __forceinline__ V operator()(V a, V b) const { return a + b; }
};
// NaN-ignoring, as std::fmax in the CPU kernels.
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __device__ __forceinline__ double operator()(double a, double b) const { return fmax(a, b); }
};

// v combined over the warp (kBlock false) or the whole block (kBlock true: every thread of the block
// must call it). The butterfly gives every lane the same bits (each pair applies the commutative op
// to the same two operands); the block step folds the warps' values in order in every thread.
// `shared` holds blockDim.x / 32 values.
template <bool kBlock, class V, class Op>
__device__ __forceinline__ V group_all_reduce(V v, Op op, V* shared) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if constexpr (kBlock) {
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
    __syncthreads();
    v = shared[0];
    for (unsigned w = 1; w < blockDim.x / 32; ++w) v = op(v, shared[w]);
    __syncthreads();  // `shared` may be reused by the next call
  }
  return v;
}

// Who reduces one row (a layer-norm row, a cross-entropy position): a thread, a warp (blockDim.x / 32
// rows per block) or the whole block. Rows are strided over the grid; the threads of a group take
// the row's elements rank, rank + size, ...
enum class Group { thread, warp, block };
template <Group G>
struct RowGroup {
  __device__ static int size() { return G == Group::thread ? 1 : G == Group::warp ? 32 : static_cast<int>(blockDim.x); }
  __device__ static int rank() {
    return G == Group::thread ? 0 : G == Group::warp ? static_cast<int>(threadIdx.x % 32) : static_cast<int>(threadIdx.x);
  }
  __device__ static int64_t per_block() {
    return G == Group::thread ? blockDim.x : G == Group::warp ? blockDim.x / 32 : 1;
  }
  __device__ static int64_t first() {
    const int64_t in_block = G == Group::thread ? threadIdx.x : G == Group::warp ? threadIdx.x / 32 : 0;
    return int64_t{blockIdx.x} * per_block() + in_block;
  }
  __device__ static int64_t stride() { return int64_t{gridDim.x} * per_block(); }
  // v combined over the group; `shared` as for group_all_reduce.
  template <class V, class Op>
  __device__ static V all_reduce(V v, Op op, V* shared) {
    if constexpr (G == Group::thread)
      return v;
    else
      return group_all_reduce<G == Group::block>(v, op, shared);
  }
};

// Rows of at least this many elements get a block each, shorter ones a warp.
inline constexpr int64_t kBlockRowLength = 1024;

}  // namespace ember::cuda

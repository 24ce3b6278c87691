// Device side of the elementwise kernels: one grid-stride loop over N strided operands (operand 0
// is the output), with a dense fast path, and its launcher. Included by cuda/*.cu only.
#pragma once

#include <cstdint>

#include "cuda/error.h"
#include "cuda/kernels.h"

namespace ember::cuda {

inline constexpr int kThreads = 256;

// f(p) computes one element; p[k] points at operand k's element.
template <int N, class F>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(Strided<N> a, F f) {
  const int64_t step = int64_t{blockDim.x} * gridDim.x;
  int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (a.dense) {
    for (; i < a.numel; i += step) {
      char* p[N];
#pragma unroll
      for (int k = 0; k < N; ++k) p[k] = a.data[k] + i * a.elem_size[k];
      f(p);
    }
    return;
  }
  for (; i < a.numel; i += step) {
    char* p[N];
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = a.data[k];
    int64_t rest = i;
    for (int d = a.nd - 1; d >= 0; --d) {
      const int64_t idx = rest % a.sizes[d];
      rest /= a.sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) p[k] += idx * a.strides[k][d];
    }
    f(p);
  }
}

template <int N, class F>
void launch_elementwise(const Strided<N>& a, const F& f, cudaStream_t stream) {
  if (a.numel == 0) return;
  elementwise_kernel<N, F><<<grid_blocks(a.numel, kThreads), kThreads, 0, stream>>>(a, f);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <class T>
__device__ __forceinline__ const T& at(const char* p) {
  return *reinterpret_cast<const T*>(p);
}
template <class T>
__device__ __forceinline__ T& at(char* p) {
  return *reinterpret_cast<T*>(p);
}

// Raised on the host when a kernel leaves an unsupported dtype behind (the .cpp checks first).
[[noreturn]] inline void unsupported(const char* what, DType dtype) {
  throw DTypeError(std::string(what) + ": not supported for dtype " + dtype_name(dtype) + " on CUDA");
}

// Records the first out-of-range index any kernel meets (op, index, bound) in the mapped slot the
// host reads after a synchronisation; later ones are dropped.
__device__ inline void report_bad_index(KernelErrorSlot* errors, int32_t op, int64_t index, int64_t bound) {
  volatile KernelErrorSlot* slot = errors;
  if (slot->op != 0) return;
  slot->index = index;
  slot->bound = bound;
  __threadfence_system();  // the fields are visible before op says they are set
  slot->op = op;
}

}  // namespace ember::cuda

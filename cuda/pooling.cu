// Kernels of max pooling, average pooling and average pooling's backward (launchers in
// cuda/pooling.h). Same windows, divisors, index convention and NaN/tie rules as cpu/pooling.cpp.
#include <algorithm>
#include <limits>

#include "cuda/loops.cuh"
#include "cuda/pooling.h"
#include "nn/primitives/avg_pool_window.h"
#include "tensor/convert.h"

namespace ember::cuda {

namespace {

struct Range {
  int64_t lo, hi;
};

// The outputs along dim d (0: rows, 1: columns) whose average-pooling windows may hold input
// position p: a superset, which avg_window then narrows.
__device__ Range windows_holding(const PoolShape& s, int d, int64_t p) {
  const int64_t in = d == 0 ? s.H : s.W, out = d == 0 ? s.OH : s.OW;
  int64_t lo, hi;
  if (s.adaptive) {  // window i is [floor(i * in / out), ceil((i + 1) * in / out))
    lo = p * out / in;
    hi = ((p + 1) * out + in - 1) / in;
  } else {  // window i is [i * stride - padding, + kernel)
    const int64_t first = p + s.padding[d] - s.kernel[d] + 1;
    lo = first <= 0 ? 0 : (first + s.stride[d] - 1) / s.stride[d];
    hi = (p + s.padding[d]) / s.stride[d] + 1;
  }
  return {std::max<int64_t>(lo, 0), std::min(hi, out)};
}

// Padding acts as -inf; the first NaN wins; ties go to the first position in row-major order.
template <class T>
__global__ void __launch_bounds__(kThreads) max_pool2d_kernel(const T* x, T* values, int64_t* indices, PoolShape s) {
  using C = compute_t<T>;
  const int64_t total = s.N * s.C * s.OH * s.OW, step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t o = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; o < total; o += step) {
    const int64_t j = o % s.OW, i = o / s.OW % s.OH, nc = o / (s.OW * s.OH);
    const T* plane = x + nc / s.C * s.strides[0] + nc % s.C * s.strides[1];
    C best = -std::numeric_limits<C>::infinity();
    int64_t arg = -1;
    bool nan = false;
    for (int64_t ki = 0; ki < s.kernel[0] && !nan; ++ki) {
      const int64_t h = i * s.stride[0] - s.padding[0] + ki * s.dilation[0];
      if (h < 0 || h >= s.H) continue;
      for (int64_t kj = 0; kj < s.kernel[1] && !nan; ++kj) {
        const int64_t w = j * s.stride[1] - s.padding[1] + kj * s.dilation[1];
        if (w < 0 || w >= s.W) continue;
        const C v = static_cast<C>(plane[h * s.strides[2] + w * s.strides[3]]);
        nan = ew::is_nan(v);
        if (arg < 0 || v > best || nan) {
          best = v;
          arg = h * s.W + w;
        }
      }
    }
    values[o] = convert<T>(best);
    indices[o] = arg;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) avg_pool2d_kernel(const T* x, T* y, PoolShape s) {
  using C = compute_t<T>;
  const int64_t total = s.N * s.C * s.OH * s.OW, step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t o = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; o < total; o += step) {
    const int64_t j = o % s.OW, i = o / s.OW % s.OH, nc = o / (s.OW * s.OH);
    const T* plane = x + nc / s.C * s.strides[0] + nc % s.C * s.strides[1];
    const AvgPoolWindow win = avg_pool_window(s, s, i, j);
    C acc = 0;
    for (int64_t h = win.h0; h < win.h1; ++h)
      for (int64_t w = win.w0; w < win.w1; ++w) acc += static_cast<C>(plane[h * s.strides[2] + w * s.strides[3]]);
    y[o] = convert<T>(win.divisor != 0 ? acc / static_cast<C>(win.divisor) : C(0));
  }
}

// One thread per input element gathers from the outputs whose windows hold it: no atomics, so
// every run sums in the same order.
template <class T>
__global__ void __launch_bounds__(kThreads) avg_pool2d_backward_kernel(const T* g, T* gx, PoolShape s) {
  using C = compute_t<T>;
  const int64_t total = s.N * s.C * s.H * s.W, step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t o = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; o < total; o += step) {
    const int64_t w = o % s.W, h = o / s.W % s.H, nc = o / (s.W * s.H);
    const T* plane = g + nc / s.C * s.strides[0] + nc % s.C * s.strides[1];
    const Range rows = windows_holding(s, 0, h), cols = windows_holding(s, 1, w);
    C acc = 0;
    for (int64_t i = rows.lo; i < rows.hi; ++i)
      for (int64_t j = cols.lo; j < cols.hi; ++j) {
        const AvgPoolWindow win = avg_pool_window(s, s, i, j);
        if (win.divisor == 0 || h < win.h0 || h >= win.h1 || w < win.w0 || w >= win.w1) continue;
        acc += static_cast<C>(plane[i * s.strides[2] + j * s.strides[3]]) / static_cast<C>(win.divisor);
      }
    gx[o] = convert<T>(acc);
  }
}

}  // namespace

void launch_max_pool2d(DType dtype, const void* x, void* values, int64_t* indices, const PoolShape& s,
                       cudaStream_t stream) {
  const int64_t n = s.N * s.C * s.OH * s.OW;
  if (n == 0) return;
  visit_floating(dtype, "max_pool2d", [&]<class T>() {
    max_pool2d_kernel<T><<<grid_blocks(n, kThreads), kThreads, 0, stream>>>(static_cast<const T*>(x),
                                                                             static_cast<T*>(values), indices, s);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void launch_avg_pool2d(DType dtype, const void* x, void* y, const PoolShape& s, cudaStream_t stream) {
  const int64_t n = s.N * s.C * s.OH * s.OW;
  if (n == 0) return;
  visit_floating(dtype, "avg_pool2d", [&]<class T>() {
    avg_pool2d_kernel<T><<<grid_blocks(n, kThreads), kThreads, 0, stream>>>(static_cast<const T*>(x),
                                                                             static_cast<T*>(y), s);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void launch_avg_pool2d_backward(DType dtype, const void* grad_out, void* grad_in, const PoolShape& s,
                                cudaStream_t stream) {
  const int64_t n = s.N * s.C * s.H * s.W;
  if (n == 0) return;
  visit_floating(dtype, "avg_pool2d_backward", [&]<class T>() {
    avg_pool2d_backward_kernel<T><<<grid_blocks(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(grad_out), static_cast<T*>(grad_in), s);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda

// Kernels of the reductions and of softmax over the (outer, len, inner) layout. With inner == 1 a
// row is reduced by one warp, or one block when rows are long; with inner > 1 one thread folds
// each output, so neighbouring threads read neighbouring columns. Accumulation is in float for
// f32/f16/bf16, double for f64 and int64 for integers and bool.
#include <cmath>
#include <limits>

#include "cuda/loops.cuh"
#include "tensor/convert.h"

namespace ember::cuda {

namespace {

template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, std::conditional_t<is_float_type_v<T>, float, int64_t>>;

template <class V>
struct ValIdx {
  V v;
  int64_t i;  // -1: no element seen
};

template <class V>
__device__ __forceinline__ V shfl_down(V v, int offset) {
  if constexpr (sizeof(V) < 4)
    return static_cast<V>(__shfl_down_sync(0xffffffffu, static_cast<int>(v), offset));
  else
    return __shfl_down_sync(0xffffffffu, v, offset);
}
template <class V>
__device__ __forceinline__ ValIdx<V> shfl_down(ValIdx<V> a, int offset) {
  return {shfl_down(a.v, offset), shfl_down(a.i, offset)};
}

template <class R, class A>
__device__ __forceinline__ A warp_reduce(A acc, const R& r) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) acc = r.combine(acc, shfl_down(acc, offset));
  return acc;  // complete in lane 0
}

// O: T's own dtype (int64 for integers) or a wider float, whose accumulator it takes.
template <class T, class O, bool kProd>
struct SumProd {
  using In = T;
  using Acc = acc_t<O>;
  using Out = O;
  __device__ Acc identity() const { return kProd ? Acc(1) : Acc(0); }
  __device__ Acc load(T x, int64_t) const { return static_cast<Acc>(static_cast<compute_t<T>>(x)); }
  __device__ Acc combine(Acc a, Acc b) const { return kProd ? a * b : a + b; }
  __device__ Out finish(Acc a) const { return convert<Out>(a); }
};

template <class C, bool kMax>
__device__ __forceinline__ C extreme_identity() {
  if constexpr (std::is_floating_point_v<C>)
    return kMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
  else
    return kMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
}

// amax / amin: NaN wins.
template <class T, bool kMax>
struct Extreme {
  using In = T;
  using Acc = compute_t<T>;
  using Out = T;
  __device__ Acc identity() const { return extreme_identity<Acc, kMax>(); }
  __device__ Acc load(T x, int64_t) const { return static_cast<Acc>(x); }
  __device__ Acc combine(Acc a, Acc b) const {
    if (ew::is_nan(a)) return a;
    if (ew::is_nan(b)) return b;
    return kMax ? (b > a ? b : a) : (b < a ? b : a);
  }
  __device__ Out finish(Acc a) const { return convert<Out>(a); }
};

// argmax / argmin: the first index of the extreme; a NaN counts as the extreme.
template <class T, bool kMax>
struct ArgExtreme {
  using In = T;
  using Acc = ValIdx<compute_t<T>>;
  using Out = int64_t;
  __device__ Acc identity() const { return {compute_t<T>(0), -1}; }
  __device__ Acc load(T x, int64_t j) const { return {static_cast<compute_t<T>>(x), j}; }
  __device__ Acc combine(Acc a, Acc b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool a_nan = ew::is_nan(a.v), b_nan = ew::is_nan(b.v);
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return a.i < b.i ? a : b;
      return a_nan ? a : b;
    }
    if (a.v == b.v) return a.i < b.i ? a : b;
    return (kMax ? b.v > a.v : b.v < a.v) ? b : a;
  }
  __device__ Out finish(Acc a) const { return a.i < 0 ? 0 : a.i; }
};

// `group` threads (32, or the whole block) reduce each row; rows are strided over the grid.
template <class R>
__global__ void __launch_bounds__(kThreads) reduce_rows_kernel(const typename R::In* x, typename R::Out* y,
                                                               int64_t rows, int64_t len, int group, R r) {
  using Acc = typename R::Acc;
  __shared__ Acc partial[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int groups = blockDim.x / group;
  const int g = threadIdx.x / group, t = threadIdx.x % group;
  for (int64_t first = int64_t{blockIdx.x} * groups; first < rows; first += int64_t{gridDim.x} * groups) {
    const int64_t row = first + g;
    Acc acc = r.identity();
    if (row < rows) {
      const typename R::In* p = x + row * len;
      for (int64_t j = t; j < len; j += group) acc = r.combine(acc, r.load(p[j], j));
    }
    acc = warp_reduce(acc, r);
    if (group > 32) {  // uniform across the block: every thread takes this branch together
      if (lane == 0) partial[warp] = acc;
      __syncthreads();
      if (warp == 0) {
        acc = lane < group / 32 ? partial[lane] : r.identity();
        acc = warp_reduce(acc, r);
      }
      __syncthreads();
    }
    if (t == 0 && row < rows) y[row] = r.finish(acc);
  }
}

// One thread per output column: threads k and k + 1 read adjacent elements.
template <class R>
__global__ void __launch_bounds__(kThreads) reduce_columns_kernel(const typename R::In* x, typename R::Out* y,
                                                                  int64_t outer, int64_t len, int64_t inner, R r) {
  const int64_t outputs = outer * inner, step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t k = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < outputs; k += step) {
    const typename R::In* p = x + (k / inner) * len * inner + k % inner;
    typename R::Acc acc = r.identity();
    for (int64_t j = 0; j < len; ++j) acc = r.combine(acc, r.load(p[j * inner], j));
    y[k] = r.finish(acc);
  }
}

template <class R>
void launch_reducer(const R& r, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                    cudaStream_t stream) {
  const auto* in = static_cast<const typename R::In*>(x);
  auto* out = static_cast<typename R::Out*>(y);
  if (outer * inner == 0) return;
  if (inner == 1) {
    const int group = len >= 1024 ? kThreads : 32;
    reduce_rows_kernel<R><<<grid_blocks(outer * group, kThreads), kThreads, 0, stream>>>(in, out, outer, len, group, r);
  } else {
    reduce_columns_kernel<R><<<grid_blocks(outer * inner, kThreads), kThreads, 0, stream>>>(in, out, outer, len,
                                                                                           inner, r);
  }
  EMBER_CUDA_LAUNCH_CHECK();
}

// ---- softmax: one block per row
template <class A, bool kMax>
__device__ A block_reduce(A v, A* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const A o = __shfl_down_sync(0xffffffffu, v, offset);
    v = kMax ? (o > v ? o : v) : v + o;
  }
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : (kMax ? -std::numeric_limits<A>::infinity() : A(0));
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const A o = __shfl_down_sync(0xffffffffu, v, offset);
      v = kMax ? (o > v ? o : v) : v + o;
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  const A result = shared[0];
  __syncthreads();  // shared is reused by the next reduction
  return result;
}

template <class T>
__device__ __forceinline__ acc_t<T> widen(T x) {
  return static_cast<acc_t<T>>(static_cast<compute_t<T>>(x));
}

// One block per row (inner == 1).
template <class T>
__global__ void __launch_bounds__(kThreads) softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t len, bool log) {
  using A = acc_t<T>;
  __shared__ A shared[kThreads / 32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* px = x + row * len;
    T* py = y + row * len;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      const A v = widen(px[j]);
      m = v > m ? v : m;  // a NaN is skipped here and poisons the sum below, as in PyTorch
    }
    m = block_reduce<A, true>(m, shared);
    A s = 0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) s += std::exp(widen(px[j]) - m);
    s = block_reduce<A, false>(s, shared);
    const A log_s = std::log(s);
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      const A shifted = widen(px[j]) - m;
      py[j] = convert<T>(log ? shifted - log_s : std::exp(shifted) / s);
    }
  }
}

// One thread per column (inner > 1).
template <class T>
__global__ void __launch_bounds__(kThreads) softmax_columns_kernel(const T* x, T* y, int64_t outer, int64_t len,
                                                                   int64_t inner, bool log) {
  using A = acc_t<T>;
  const int64_t columns = outer * inner, step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t k = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < columns; k += step) {
    const int64_t base = (k / inner) * len * inner + k % inner;
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t j = 0; j < len; ++j) {
      const A v = widen(x[base + j * inner]);
      m = v > m ? v : m;
    }
    A s = 0;
    for (int64_t j = 0; j < len; ++j) s += std::exp(widen(x[base + j * inner]) - m);
    const A log_s = std::log(s);
    for (int64_t j = 0; j < len; ++j) {
      const A shifted = widen(x[base + j * inner]) - m;
      y[base + j * inner] = convert<T>(log ? shifted - log_s : std::exp(shifted) / s);
    }
  }
}

}  // namespace

void launch_reduce(ReduceKind kind, DType dtype, DType out, const void* x, void* y, int64_t outer, int64_t len,
                   int64_t inner, cudaStream_t stream) {
  visit(dtype, [&]<class T>() {
    auto sum_prod = [&]<bool kProd>() {
      if constexpr (!is_float_type_v<T>) launch_reducer(SumProd<T, int64_t, kProd>{}, x, y, outer, len, inner, stream);
      else if (out == DType::f64) launch_reducer(SumProd<T, double, kProd>{}, x, y, outer, len, inner, stream);
      else if (out == DType::f32) launch_reducer(SumProd<T, float, kProd>{}, x, y, outer, len, inner, stream);
      else launch_reducer(SumProd<T, T, kProd>{}, x, y, outer, len, inner, stream);
    };
    switch (kind) {
      case ReduceKind::sum: return sum_prod.template operator()<false>();
      case ReduceKind::prod: return sum_prod.template operator()<true>();
      case ReduceKind::max: return launch_reducer(Extreme<T, true>{}, x, y, outer, len, inner, stream);
      case ReduceKind::min: return launch_reducer(Extreme<T, false>{}, x, y, outer, len, inner, stream);
      case ReduceKind::argmax: return launch_reducer(ArgExtreme<T, true>{}, x, y, outer, len, inner, stream);
      case ReduceKind::argmin: return launch_reducer(ArgExtreme<T, false>{}, x, y, outer, len, inner, stream);
    }
  });
}

void launch_softmax(DType dtype, bool log, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                    cudaStream_t stream) {
  if (outer * len * inner == 0) return;
  visit(dtype, [&]<class T>() {
    if constexpr (is_float_type_v<T>) {
      const auto* in = static_cast<const T*>(x);
      auto* out = static_cast<T*>(y);
      if (inner == 1) {
        int threads = 32;
        while (threads < kThreads && threads < len) threads *= 2;
        const auto blocks = static_cast<unsigned>(std::min<int64_t>(outer, int64_t{1} << 30));
        softmax_rows_kernel<T><<<blocks, threads, 0, stream>>>(in, out, outer, len, log);
      } else {
        softmax_columns_kernel<T><<<grid_blocks(outer * inner, kThreads), kThreads, 0, stream>>>(in, out, outer, len,
                                                                                                inner, log);
      }
      EMBER_CUDA_LAUNCH_CHECK();
    } else {
      unsupported(log ? "log_softmax" : "softmax", dtype);
    }
  });
}

}  // namespace ember::cuda

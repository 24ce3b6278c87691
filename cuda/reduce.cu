// Kernels of the reductions, softmax and the cumulative sum over the (outer, len, inner) layout. With inner == 1 a
// row is reduced by one warp, or one block when rows are long; with inner > 1 a block's lanes take
// neighbouring outputs, so neighbouring threads read neighbouring columns. When the outputs are too
// few to fill the device, len is split (plan_reduce) and the splits' partials merged in order.
// Accumulation is in float for f32/f16/bf16, double for f64 and int64 for integers and bool.
#include <algorithm>
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
  // bool compared as int: a one-byte value beside the index makes ptxas (CUDA 13) spill 4-8 bytes.
  using V = std::conditional_t<std::is_same_v<T, bool>, int, compute_t<T>>;
  using Acc = ValIdx<V>;
  using Out = int64_t;
  __device__ Acc identity() const { return {V(0), -1}; }
  __device__ Acc load(T x, int64_t j) const { return {static_cast<V>(x), j}; }
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

// Where block (x, y) of a reduction leaves what it folded: the output itself when one split folds all
// of len, else its partial at partials[y * outputs + k] for reduce_partials_kernel to merge.
template <class R>
__device__ __forceinline__ void store_fold(const R& r, typename R::Acc acc, typename R::Out* y,
                                           typename R::Acc* partials, int64_t outputs, int64_t k) {
  if (gridDim.y == 1)
    y[k] = r.finish(acc);
  else
    partials[int64_t{blockIdx.y} * outputs + k] = acc;
}

// `group` threads (32, or the whole block) reduce each row; rows are strided over the grid's x, and
// its y splits len into chunks.
template <class R>
__global__ void __launch_bounds__(kThreads) reduce_rows_kernel(const typename R::In* x, typename R::Out* y,
                                                               typename R::Acc* partials, int64_t rows, int64_t len,
                                                               int64_t chunk, int group, R r) {
  using Acc = typename R::Acc;
  __shared__ Acc partial[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int groups = blockDim.x / group;
  const int g = threadIdx.x / group, t = threadIdx.x % group;
  const int64_t begin = int64_t{blockIdx.y} * chunk, end = begin + chunk < len ? begin + chunk : len;
  for (int64_t first = int64_t{blockIdx.x} * groups; first < rows; first += int64_t{gridDim.x} * groups) {
    const int64_t row = first + g;
    Acc acc = r.identity();
    if (row < rows) {
      const typename R::In* p = x + row * len;
      for (int64_t j = begin + t; j < end; j += group) acc = r.combine(acc, r.load(p[j], j));
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
    if (t == 0 && row < rows) store_fold(r, acc, y, partials, rows, row);
  }
}

// Blocks of kReduceColumnLanes x kReduceColumnRows threads: the lanes take adjacent outputs (adjacent
// in memory when inner >= 32), the rows of a block stride through the block's chunk of len, then
// merge in a shared-memory tree. Column tiles are strided over the grid's x, chunks of len are its y.
template <class R>
__global__ void __launch_bounds__(kThreads) reduce_columns_kernel(const typename R::In* x, typename R::Out* y,
                                                                  typename R::Acc* partials, int64_t outer,
                                                                  int64_t len, int64_t inner, int64_t chunk, R r) {
  using Acc = typename R::Acc;
  __shared__ Acc tree[kThreads];
  const int lane = threadIdx.x, row = threadIdx.y;
  const int64_t outputs = outer * inner;
  const int64_t begin = int64_t{blockIdx.y} * chunk, end = begin + chunk < len ? begin + chunk : len;
  for (int64_t tile = blockIdx.x; tile * kReduceColumnLanes < outputs; tile += gridDim.x) {  // uniform per block
    const int64_t k = tile * kReduceColumnLanes + lane;
    Acc acc = r.identity();
    if (k < outputs) {
      const typename R::In* p = x + (k / inner) * len * inner + k % inner;
      for (int64_t j = begin + row; j < end; j += kReduceColumnRows) acc = r.combine(acc, r.load(p[j * inner], j));
    }
    tree[row * kReduceColumnLanes + lane] = acc;
    __syncthreads();
    for (int half = kReduceColumnRows / 2; half > 0; half /= 2) {
      if (row < half) tree[row * kReduceColumnLanes + lane] = r.combine(tree[row * kReduceColumnLanes + lane],
                                                                  tree[(row + half) * kReduceColumnLanes + lane]);
      __syncthreads();
    }
    if (row == 0 && k < outputs) store_fold(r, tree[lane], y, partials, outputs, k);
    __syncthreads();  // the tree is refilled by the next tile
  }
}

// Merges the splits' partials of each output in split order: the result does not depend on timing.
template <class R>
__global__ void __launch_bounds__(kThreads) reduce_partials_kernel(const typename R::Acc* partials,
                                                                   typename R::Out* y, int64_t outputs,
                                                                   int64_t splits, R r) {
  const int64_t step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t k = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < outputs; k += step) {
    typename R::Acc acc = partials[k];
    for (int64_t s = 1; s < splits; ++s) acc = r.combine(acc, partials[s * outputs + k]);
    y[k] = r.finish(acc);
  }
}

template <class R>
void launch_reducer(const R& r, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                    const ReducePlan& plan, void* workspace, cudaStream_t stream) {
  static_assert(sizeof(typename R::Acc) <= kReducePartialBytes, "a partial outgrows the workspace");
  const auto* in = static_cast<const typename R::In*>(x);
  auto* out = static_cast<typename R::Out*>(y);
  auto* partials = static_cast<typename R::Acc*>(workspace);
  const int64_t outputs = outer * inner;
  if (outputs == 0) return;
  const auto splits = static_cast<unsigned>(plan.splits);
  if (inner == 1) {
    const int group = reduce_row_group(len);
    reduce_rows_kernel<R><<<dim3(grid_blocks(outer * group, kThreads), splits), kThreads, 0, stream>>>(
        in, out, partials, outer, len, plan.chunk, group, r);
  } else {
    const int64_t tiles = (outputs + kReduceColumnLanes - 1) / kReduceColumnLanes;
    const dim3 grid(grid_blocks(tiles * kThreads, kThreads), splits), block(kReduceColumnLanes, kReduceColumnRows);
    reduce_columns_kernel<R><<<grid, block, 0, stream>>>(in, out, partials, outer, len, inner, plan.chunk, r);
  }
  EMBER_CUDA_LAUNCH_CHECK();
  if (splits > 1) {
    reduce_partials_kernel<R><<<grid_blocks(outputs, kThreads), kThreads, 0, stream>>>(partials, out, outputs,
                                                                                      plan.splits, r);
    EMBER_CUDA_LAUNCH_CHECK();
  }
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

// Calls f(base) for each column (o, i) of the (outer, len, inner) layout this thread takes in a
// grid-stride loop (neighbouring threads, neighbouring columns); the column's element r is at
// base + r * inner.
template <class F>
__device__ __forceinline__ void for_each_column(int64_t outer, int64_t len, int64_t inner, F&& f) {
  const int64_t columns = outer * inner, step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t k = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < columns; k += step)
    f((k / inner) * len * inner + k % inner);
}

// One thread per column (inner > 1).
template <class T>
__global__ void __launch_bounds__(kThreads) softmax_columns_kernel(const T* x, T* y, int64_t outer, int64_t len,
                                                                   int64_t inner, bool log) {
  using A = acc_t<T>;
  for_each_column(outer, len, inner, [&](int64_t base) {
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
  });
}

// ---- cumulative sum

// The scan's accumulator: cumsum's accumulation rule, with integers summed unsigned so that they wrap.
template <class T>
using scan_acc_t = std::conditional_t<std::is_integral_v<T>, unsigned long long, acc_t<T>>;

template <class A, class T>
__device__ __forceinline__ A scan_load(T x) {
  if constexpr (std::is_integral_v<T>) return static_cast<A>(static_cast<long long>(x));
  else return static_cast<A>(static_cast<compute_t<T>>(x));
}
template <class T, class A>
__device__ __forceinline__ T scan_store(A a) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<long long>(a));
  else return convert<T>(a);
}

// One warp per row (inner == 1), 32 elements a step: a shuffle scan across the lanes plus the sum
// carried from the step before, so reads and writes are coalesced.
template <class T>
__global__ void __launch_bounds__(kThreads) cumsum_rows_kernel(const T* x, T* y, int64_t rows, int64_t len,
                                                               bool reverse) {
  using A = scan_acc_t<T>;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / 32;
  for (int64_t row = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    A carry = 0;
    for (int64_t start = 0; start < len; start += 32) {
      const int64_t step = start + lane, r = reverse ? len - 1 - step : step;
      A v = step < len ? scan_load<A>(x[row * len + r]) : A(0);
#pragma unroll
      for (int offset = 1; offset < 32; offset *= 2) {
        const A before = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += before;
      }
      v += carry;
      if (step < len) y[row * len + r] = scan_store<T>(v);
      carry = __shfl_sync(0xffffffffu, v, 31);
    }
  }
}

// One thread per column (inner > 1).
template <class T>
__global__ void __launch_bounds__(kThreads) cumsum_columns_kernel(const T* x, T* y, int64_t outer, int64_t len,
                                                                  int64_t inner, bool reverse) {
  using A = scan_acc_t<T>;
  for_each_column(outer, len, inner, [&](int64_t base) {
    A total = 0;
    for (int64_t step = 0; step < len; ++step) {
      const int64_t at = base + (reverse ? len - 1 - step : step) * inner;
      total += scan_load<A>(x[at]);
      y[at] = scan_store<T>(total);
    }
  });
}

}  // namespace

ReducePlan plan_reduce(int64_t outer, int64_t len, int64_t inner) {
  const DeviceContext& ctx = context(current_device());
  return plan_reduce_for(outer, len, inner, ctx.sm_count, ctx.max_threads_per_sm);
}

void launch_reduce(ReduceKind kind, DType dtype, DType out, const void* x, void* y, int64_t outer, int64_t len,
                   int64_t inner, const ReducePlan& plan, void* workspace, cudaStream_t stream) {
  auto run = [&](const auto& reducer) { launch_reducer(reducer, x, y, outer, len, inner, plan, workspace, stream); };
  visit(dtype, [&]<class T>() {
    auto sum_prod = [&]<bool kProd>() {
      if constexpr (!is_float_type_v<T>) run(SumProd<T, int64_t, kProd>{});
      else if (out == DType::f64) run(SumProd<T, double, kProd>{});
      else if (out == DType::f32) run(SumProd<T, float, kProd>{});
      else run(SumProd<T, T, kProd>{});
    };
    switch (kind) {
      case ReduceKind::sum: return sum_prod.template operator()<false>();
      case ReduceKind::prod: return sum_prod.template operator()<true>();
      case ReduceKind::max: return run(Extreme<T, true>{});
      case ReduceKind::min: return run(Extreme<T, false>{});
      case ReduceKind::argmax: return run(ArgExtreme<T, true>{});
      case ReduceKind::argmin: return run(ArgExtreme<T, false>{});
    }
  });
}

void launch_cumsum(DType dtype, bool reverse, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                   cudaStream_t stream) {
  if (outer * len * inner == 0) return;
  visit(dtype, [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      unsupported("cumsum", dtype);  // the front end sums bool as int64
    } else {
      const auto* in = static_cast<const T*>(x);
      auto* out = static_cast<T*>(y);
      if (inner == 1)
        cumsum_rows_kernel<T><<<grid_blocks(outer * 32, kThreads), kThreads, 0, stream>>>(in, out, outer, len, reverse);
      else
        cumsum_columns_kernel<T><<<grid_blocks(outer * inner, kThreads), kThreads, 0, stream>>>(in, out, outer, len,
                                                                                               inner, reverse);
      EMBER_CUDA_LAUNCH_CHECK();
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

// Kernels of batch norm and layer norm, computing in A (float; double for f64):
//  - per-channel reductions over (N, C, S) (batch statistics, the backward sums, layer norm's
//    dweight/dbias over rows): a partial per (split, channel) block, merged in split order;
//  - elementwise passes over (N, C, S) in the output's memory order, with per-channel coefficients;
//  - layer norm's rows: a warp per row (short rows) or a block, two-pass statistics.
// Statistics are Welford's running mean and sum of squared deviations (B. P. Welford, Technometrics
// 4(3), 1962), merged with the pairwise formula of Chan, Golub and LeVeque ("Algorithms for computing
// the sample variance: analysis and recommendations", The American Statistician 37(3), 1983).
#include <algorithm>
#include <cmath>

#include "cuda/accumulate.cuh"
#include "cuda/normalization.h"
#include "tensor/convert.h"

namespace ember::cuda {

namespace {

// A linear index e = (a * rb + b) * rf + f as its digits; advance() adds a step given as digits,
// with carries, so that a grid-stride loop divides once per thread, not once per element.
struct Digits {
  int64_t a, b, f;
};
__device__ __forceinline__ Digits digits_of(int64_t e, int64_t rb, int64_t rf) {
  Digits d;
  d.f = e % rf;
  e /= rf;
  d.b = e % rb;
  d.a = e / rb;
  return d;
}
// Both digits below their radix on entry, so one subtraction each clears the carry.
__device__ __forceinline__ void advance(Digits& d, const Digits& step, int64_t rb, int64_t rf) {
  d.f += step.f;
  int64_t carry = 0;
  if (d.f >= rf) {
    d.f -= rf;
    carry = 1;
  }
  d.b += step.b + carry;
  carry = 0;
  if (d.b >= rb) {
    d.b -= rb;
    carry = 1;
  }
  d.a += step.a + carry;
}

__device__ __forceinline__ int64_t ncs_offset(const ChannelStrides& l, int64_t n, int64_t c, int64_t i) {
  return n * l.n + c * l.c + i * l.s;
}

// ---- accumulators of the per-channel reductions; a partial is stored as two A values

template <class A>
struct Welford {
  A mean, m2;
  int64_t n;
  __device__ static Welford zero() { return {A(0), A(0), 0}; }
  __device__ void add(A x) {
    ++n;
    const A d = x - mean;
    mean += d / static_cast<A>(n);
    m2 += d * (x - mean);
  }
  __device__ static Welford merge(const Welford& p, const Welford& q) {
    if (p.n == 0) return q;
    if (q.n == 0) return p;
    const int64_t n = p.n + q.n;
    const A d = q.mean - p.mean, wq = static_cast<A>(q.n) / static_cast<A>(n);
    return {p.mean + d * wq, p.m2 + q.m2 + d * d * static_cast<A>(p.n) * wq, n};
  }
  __device__ void store(A* p) const {
    p[0] = mean;
    p[1] = m2;
  }
};

template <class A>
struct Sums {
  A a, b;
  __device__ static Sums zero() { return {A(0), A(0)}; }
  __device__ static Sums merge(const Sums& p, const Sums& q) { return {p.a + q.a, p.b + q.b}; }
  __device__ void store(A* p) const {
    p[0] = a;
    p[1] = b;
  }
};

// Block (x, k) of the ChannelReduction r: visit(acc, c, n, i) folds element (n, c, i) into the
// thread's accumulator; the by threads of a channel then merge theirs in a shared-memory tree, and
// the result is the partial (k, c) at partials[2 * (k * C + c)].
template <class Acc, class A, class Visit>
__global__ void __launch_bounds__(kThreads) channel_partials_kernel(ChannelReduction r, Visit visit, A* partials) {
  __shared__ Acc tree[kThreads];
  const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
  const int64_t c = int64_t{blockIdx.x} * bx + tx;
  const int64_t M = r.N * r.S, begin = int64_t{blockIdx.y} * r.chunk;
  const int64_t end = begin + r.chunk < M ? begin + r.chunk : M;
  Acc acc = Acc::zero();
  if (c < r.C && begin + ty < end) {
    Digits d = digits_of(begin + ty, 1, r.S);  // (n, 0, i)
    const Digits step = digits_of(by, 1, r.S);
    for (int64_t m = begin + ty; m < end; m += by) {
      visit(acc, c, d.a, d.f);
      advance(d, step, 1, r.S);
    }
  }
  tree[ty * bx + tx] = acc;
  __syncthreads();
  for (int s = by / 2; s > 0; s >>= 1) {
    if (ty < s) tree[ty * bx + tx] = Acc::merge(tree[ty * bx + tx], tree[(ty + s) * bx + tx]);
    __syncthreads();
  }
  if (ty == 0 && c < r.C) tree[tx].store(partials + 2 * (int64_t{blockIdx.y} * r.C + c));
}

template <class Acc, class A, class Visit>
void launch_channel_partials(const ChannelReduction& r, const Visit& visit, A* partials, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((r.C + r.bx - 1) / r.bx), static_cast<unsigned>(r.splits));
  channel_partials_kernel<Acc, A, Visit><<<grid, dim3(r.bx, r.by), 0, stream>>>(r, visit, partials);
  EMBER_CUDA_LAUNCH_CHECK();
}

// Batch statistics: x.
template <class T, class A>
struct BatchNormStats {
  const T* x;
  ChannelStrides lx;
  __device__ void operator()(Welford<A>& acc, int64_t c, int64_t n, int64_t i) const {
    acc.add(load_as<A>(x[ncs_offset(lx, n, c, i)]));
  }
};

// Batch-norm backward: a = sum(g), b = sum(g * (x - mean)).
template <class T, class A>
struct BatchNormGradSums {
  const T* x;
  ChannelStrides lx;
  const T* g;
  ChannelStrides lg;
  const A* mean;
  __device__ void operator()(Sums<A>& acc, int64_t c, int64_t n, int64_t i) const {
    const A gv = load_as<A>(g[ncs_offset(lg, n, c, i)]);
    acc.a += gv;
    acc.b += gv * (load_as<A>(x[ncs_offset(lx, n, c, i)]) - mean[c]);
  }
};

// Layer-norm backward, column c of row n: a = sum(g * xhat) (dweight), b = sum(g) (dbias).
template <class T, class A>
struct LayerNormGradSums {
  const T* x;
  const T* g;
  int64_t D;
  const A* row_mean;
  const A* row_rstd;
  __device__ void operator()(Sums<A>& acc, int64_t c, int64_t n, int64_t) const {
    const A gv = load_as<A>(g[n * D + c]);
    acc.a += gv * (load_as<A>(x[n * D + c]) - row_mean[n]) * row_rstd[n];
    acc.b += gv;
  }
};

// ---- per-channel kernels: one thread per channel

// mean and rstd from the Welford partials (training; also to a.mean and a.var, the biased variance,
// when given) or the running statistics (eval); with `scale`, also scale = weight * rstd and
// shift = bias - mean * scale.
template <class A>
__global__ void __launch_bounds__(kThreads) batch_norm_finish_kernel(BatchNormArgs a, const A* partials, A* mean,
                                                                     A* rstd, A* scale, A* shift) {
  const ChannelReduction& r = a.plan;
  const int64_t M = r.N * r.S, step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < r.C; c += step) {
    A m, v;
    if (partials) {
      Welford<A> w = Welford<A>::zero();
      for (int64_t k = 0; k < r.splits; ++k) {
        const A* p = partials + 2 * (k * r.C + c);
        const int64_t begin = k * r.chunk, end = begin + r.chunk < M ? begin + r.chunk : M;
        w = Welford<A>::merge(w, {p[0], p[1], end - begin});
      }
      m = w.mean;
      v = w.m2 / static_cast<A>(M);
      if (a.mean) {
        static_cast<A*>(a.mean)[c] = m;
        static_cast<A*>(a.var)[c] = v;
      }
    } else {
      m = static_cast<const A*>(a.running_mean)[c];
      v = static_cast<const A*>(a.running_var)[c];
    }
    const A rs = A(1) / std::sqrt(v + static_cast<A>(a.eps));
    mean[c] = m;
    rstd[c] = rs;
    if (scale) {
      const A sc = (a.weight ? static_cast<const A*>(a.weight)[c] : A(1)) * rs;
      scale[c] = sc;
      shift[c] = (a.bias ? static_cast<const A*>(a.bias)[c] : A(0)) - m * sc;
    }
  }
}

// dweight = sum(g * xhat), dbias = sum(g), and the coefficients of
//   dx = alpha * g + beta * (x - mean) + gamma,
// BatchNorm::vjp's formula with k = weight * rstd regrouped per channel:
//   training: alpha = k, beta = (2 g_var - k rstd dweight) / M, gamma = (g_mean - k dbias) / M;
//   eval:     alpha = k, beta = gamma = 0.
template <class A>
__global__ void __launch_bounds__(kThreads) batch_norm_grad_finish_kernel(BatchNormArgs a, const A* partials,
                                                                          const A* rstd, A* alpha, A* beta,
                                                                          A* gamma) {
  const ChannelReduction& r = a.plan;
  const A M = static_cast<A>(r.N * r.S);
  const int64_t step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < r.C; c += step) {
    A sg = 0, sgxc = 0;
    for (int64_t k = 0; k < r.splits; ++k) {
      sg += partials[2 * (k * r.C + c)];
      sgxc += partials[2 * (k * r.C + c) + 1];
    }
    const A rs = rstd[c], sgx = sgxc * rs;
    static_cast<A*>(a.dweight)[c] = sgx;
    static_cast<A*>(a.dbias)[c] = sg;
    const A k = (a.weight ? static_cast<const A*>(a.weight)[c] : A(1)) * rs;
    alpha[c] = k;
    if (a.training) {
      beta[c] = (A(2) * static_cast<const A*>(a.g_var)[c] - k * rs * sgx) / M;
      gamma[c] = (static_cast<const A*>(a.g_mean)[c] - k * sg) / M;
    } else {
      beta[c] = A(0);
      gamma[c] = A(0);
    }
  }
}

// first[c], second[c] = the partials' two sums over the splits.
template <class A>
__global__ void __launch_bounds__(kThreads) sums_finish_kernel(ChannelReduction r, const A* partials, A* first,
                                                               A* second) {
  const int64_t step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < r.C; c += step) {
    A s0 = 0, s1 = 0;
    for (int64_t k = 0; k < r.splits; ++k) {
      s0 += partials[2 * (k * r.C + c)];
      s1 += partials[2 * (k * r.C + c) + 1];
    }
    first[c] = s0;
    second[c] = s1;
  }
}

// ---- elementwise passes over (N, C, S)

// f(n, c, i) for every element; consecutive threads take consecutive elements of the output's
// memory order, (N, S, C) when channels_last, else (N, C, S), so that their writes coalesce.
template <class F>
__global__ void __launch_bounds__(kThreads) channel_elementwise_kernel(int64_t N, int64_t C, int64_t S,
                                                                       bool channels_last, F f) {
  const int64_t total = N * C * S, step = int64_t{blockDim.x} * gridDim.x;
  int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int64_t rb = channels_last ? S : C, rf = channels_last ? C : S;
  Digits d = digits_of(e, rb, rf);
  const Digits s = digits_of(step, rb, rf);
  for (; e < total; e += step) {
    if (channels_last)
      f(d.a, d.f, d.b);
    else
      f(d.a, d.b, d.f);
    advance(d, s, rb, rf);
  }
}

template <class F>
void launch_channel_elementwise(const ChannelReduction& r, bool channels_last, const F& f, cudaStream_t stream) {
  const int64_t total = r.N * r.C * r.S;
  if (total == 0) return;
  channel_elementwise_kernel<F><<<grid_blocks(total, kThreads), kThreads, 0, stream>>>(r.N, r.C, r.S, channels_last, f);
  EMBER_CUDA_LAUNCH_CHECK();
}

// y = x * scale + shift (the CPU kernel's form).
template <class T, class A>
struct BatchNormApply {
  const T* x;
  ChannelStrides lx;
  T* y;
  ChannelStrides ly;
  const A* scale;
  const A* shift;
  __device__ void operator()(int64_t n, int64_t c, int64_t i) const {
    y[ncs_offset(ly, n, c, i)] = convert<T>(load_as<A>(x[ncs_offset(lx, n, c, i)]) * scale[c] + shift[c]);
  }
};

template <class T, class A>
struct BatchNormGradApply {
  const T* x;
  ChannelStrides lx;
  const T* g;
  ChannelStrides lg;
  T* dx;
  ChannelStrides ld;
  const A* mean;
  const A* alpha;
  const A* beta;
  const A* gamma;
  __device__ void operator()(int64_t n, int64_t c, int64_t i) const {
    const A gv = load_as<A>(g[ncs_offset(lg, n, c, i)]), xc = load_as<A>(x[ncs_offset(lx, n, c, i)]) - mean[c];
    dx[ncs_offset(ld, n, c, i)] = convert<T>(alpha[c] * gv + beta[c] * xc + gamma[c]);
  }
};

// ---- layer norm: a warp or a block per row

// The row's mean and 1 / sqrt(biased variance + eps), two passes over it.
template <Group G, class T, class A>
__device__ __forceinline__ void row_statistics(const T* xr, int64_t D, A eps, A* shared, A* mean, A* rstd) {
  using R = RowGroup<G>;
  A s = 0;
  for (int64_t j = R::rank(); j < D; j += R::size()) s += load_as<A>(xr[j]);
  const A m = R::all_reduce(s, AddOp{}, shared) / static_cast<A>(D);
  A q = 0;
  for (int64_t j = R::rank(); j < D; j += R::size()) {
    const A d = load_as<A>(xr[j]) - m;
    q += d * d;
  }
  *mean = m;
  *rstd = A(1) / std::sqrt(R::all_reduce(q, AddOp{}, shared) / static_cast<A>(D) + eps);
}

template <class T, class A, Group G>
__global__ void __launch_bounds__(kThreads) layer_norm_kernel(LayerNormArgs a) {
  using R = RowGroup<G>;
  __shared__ A shared[kThreads / 32];
  const A* w = static_cast<const A*>(a.weight);
  const A* b = static_cast<const A*>(a.bias);
  for (int64_t row = R::first(); row < a.rows; row += R::stride()) {
    const T* xr = static_cast<const T*>(a.x) + row * a.D;
    T* yr = static_cast<T*>(a.out) + row * a.D;
    A m, rs;
    row_statistics<G>(xr, a.D, static_cast<A>(a.eps), shared, &m, &rs);
    for (int64_t j = R::rank(); j < a.D; j += R::size()) {
      A v = (load_as<A>(xr[j]) - m) * rs;
      if (w) v = v * w[j];
      if (b) v = v + b[j];
      yr[j] = convert<T>(v);
    }
  }
}

// dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * weight (LayerNorm::vjp); the rows'
// statistics are kept for the dweight / dbias pass.
template <class T, class A, Group G>
__global__ void __launch_bounds__(kThreads) layer_norm_backward_kernel(LayerNormArgs a, A* row_mean, A* row_rstd) {
  using R = RowGroup<G>;
  __shared__ A shared[kThreads / 32];
  const A* w = static_cast<const A*>(a.weight);
  const A D = static_cast<A>(a.D);
  for (int64_t row = R::first(); row < a.rows; row += R::stride()) {
    const T* xr = static_cast<const T*>(a.x) + row * a.D;
    const T* gr = static_cast<const T*>(a.g) + row * a.D;
    T* dr = static_cast<T*>(a.out) + row * a.D;
    A m, rs;
    row_statistics<G>(xr, a.D, static_cast<A>(a.eps), shared, &m, &rs);
    if (R::rank() == 0) {
      row_mean[row] = m;
      row_rstd[row] = rs;
    }
    A sgw = 0, sgwx = 0;
    for (int64_t j = R::rank(); j < a.D; j += R::size()) {
      const A gw = load_as<A>(gr[j]) * (w ? w[j] : A(1));
      sgw += gw;
      sgwx += gw * (load_as<A>(xr[j]) - m) * rs;
    }
    const A mg = R::all_reduce(sgw, AddOp{}, shared) / D;
    const A mgx = R::all_reduce(sgwx, AddOp{}, shared) / D;
    for (int64_t j = R::rank(); j < a.D; j += R::size()) {
      const A gw = load_as<A>(gr[j]) * (w ? w[j] : A(1)), xhat = (load_as<A>(xr[j]) - m) * rs;
      dr[j] = convert<T>(rs * (gw - mg - xhat * mgx));
    }
  }
}

// Calls launch(group, blocks) with a block per row for long rows, else a warp.
template <class Launch>
void launch_rows(int64_t rows, int64_t D, const Launch& launch) {
  if (D >= kBlockRowLength)
    launch(std::integral_constant<Group, Group::block>{}, grid_blocks(rows * kThreads, kThreads));
  else
    launch(std::integral_constant<Group, Group::warp>{}, grid_blocks(rows * 32, kThreads));
}

}  // namespace

ChannelReduction plan_channel_reduction(int64_t N, int64_t C, int64_t S, bool columns) {
  const DeviceContext& ctx = context(current_device());
  return plan_channel_reduction_for(N, C, S, columns, ctx.sm_count, ctx.max_threads_per_sm);
}

void launch_batch_norm(DType dtype, const BatchNormArgs& a, cudaStream_t stream) {
  const ChannelReduction& r = a.plan;
  if (r.C == 0) return;
  visit_floating(dtype, "batch_norm", [&]<class T>() {
    using A = float_acc_t<T>;
    A* partials = static_cast<A*>(a.workspace);
    A* mean = partials + partials_size(r);
    A *rstd = mean + r.C, *scale = rstd + r.C, *shift = scale + r.C;
    const T* x = static_cast<const T*>(a.x);
    if (a.training) launch_channel_partials<Welford<A>>(r, BatchNormStats<T, A>{x, a.x_strides}, partials, stream);
    batch_norm_finish_kernel<A><<<grid_blocks(r.C, kThreads), kThreads, 0, stream>>>(
        a, a.training ? partials : nullptr, mean, rstd, scale, shift);
    EMBER_CUDA_LAUNCH_CHECK();
    launch_channel_elementwise(
        r, a.out_channels_last,
        BatchNormApply<T, A>{x, a.x_strides, static_cast<T*>(a.out), a.out_strides, scale, shift}, stream);
  });
}

void launch_batch_norm_backward(DType dtype, const BatchNormArgs& a, cudaStream_t stream) {
  const ChannelReduction& r = a.plan;
  if (r.C == 0) return;
  visit_floating(dtype, "batch_norm_backward", [&]<class T>() {
    using A = float_acc_t<T>;
    A* partials = static_cast<A*>(a.workspace);
    A* mean = partials + partials_size(r);
    A *rstd = mean + r.C, *alpha = rstd + r.C, *beta = alpha + r.C, *gamma = beta + r.C;
    const T* x = static_cast<const T*>(a.x);
    const T* g = static_cast<const T*>(a.g);
    const unsigned channel_blocks = grid_blocks(r.C, kThreads);
    if (a.training) launch_channel_partials<Welford<A>>(r, BatchNormStats<T, A>{x, a.x_strides}, partials, stream);
    batch_norm_finish_kernel<A><<<channel_blocks, kThreads, 0, stream>>>(a, a.training ? partials : nullptr, mean,
                                                                         rstd, nullptr, nullptr);
    EMBER_CUDA_LAUNCH_CHECK();
    launch_channel_partials<Sums<A>>(r, BatchNormGradSums<T, A>{x, a.x_strides, g, a.g_strides, mean}, partials,
                                     stream);
    batch_norm_grad_finish_kernel<A><<<channel_blocks, kThreads, 0, stream>>>(a, partials, rstd, alpha, beta, gamma);
    EMBER_CUDA_LAUNCH_CHECK();
    launch_channel_elementwise(r, a.out_channels_last,
                               BatchNormGradApply<T, A>{x, a.x_strides, g, a.g_strides, static_cast<T*>(a.out),
                                                        a.out_strides, mean, alpha, beta, gamma},
                               stream);
  });
}

void launch_layer_norm(DType dtype, const LayerNormArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.D == 0) return;
  visit_floating(dtype, "layer_norm", [&]<class T>() {
    using A = float_acc_t<T>;
    launch_rows(a.rows, a.D, [&](auto group, unsigned blocks) {
      layer_norm_kernel<T, A, decltype(group)::value><<<blocks, kThreads, 0, stream>>>(a);
      EMBER_CUDA_LAUNCH_CHECK();
    });
  });
}

void launch_layer_norm_backward(DType dtype, const LayerNormArgs& a, cudaStream_t stream) {
  if (a.D == 0) return;
  visit_floating(dtype, "layer_norm_backward", [&]<class T>() {
    using A = float_acc_t<T>;
    A* row_mean = static_cast<A*>(a.workspace);
    A* row_rstd = row_mean + a.rows;
    A* partials = row_rstd + a.rows;
    if (a.rows > 0)
      launch_rows(a.rows, a.D, [&](auto group, unsigned blocks) {
        layer_norm_backward_kernel<T, A, decltype(group)::value><<<blocks, kThreads, 0, stream>>>(a, row_mean, row_rstd);
        EMBER_CUDA_LAUNCH_CHECK();
      });
    const LayerNormGradSums<T, A> sums{static_cast<const T*>(a.x), static_cast<const T*>(a.g), a.D, row_mean, row_rstd};
    launch_channel_partials<Sums<A>>(a.columns, sums, partials, stream);
    sums_finish_kernel<A><<<grid_blocks(a.D, kThreads), kThreads, 0, stream>>>(
        a.columns, partials, static_cast<A*>(a.dweight), static_cast<A*>(a.dbias));
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda

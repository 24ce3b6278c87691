// Kernels of fused scaled dot-product attention after FlashAttention-2 (Dao 2023, arXiv:2307.08691,
// Algorithm 1 forward, Algorithm 2 backward), never holding the (L, S) scores in global memory.
//
// Forward: a block of 4 warps takes 64 query rows (16 per warp) of one batch entry and walks the key
// tiles with the online softmax of Milakov & Gimelshein (arXiv:1805.02867): per row a running max m
// and sum l, the output accumulator rescaled by e^(m_old - m_new) when the max grows. Each warp owns
// its 16 rows of every tile (scores, weights, output), so between the block-wide loads of k and v it
// needs no other warp.
// Backward: D = rowsum(g * out) first (a warp per row), then a block per key tile of one batch entry
// walks the query tiles, recomputing P = e^(S - m) / l from q, k and the saved row max and sum:
//   dv += (P Z)^T g,  dS = P * (Z * (g v^T) - D),  dk += scale dS^T q,  dq += scale dS k,
// Z the dropout factors. dk and dv stay in registers for the whole walk; dq's tile is added to an
// (N, L, E) buffer of A with atomics (FlashAttention-2's choice: one pass over the products, where a
// query-parallel pass for dq would compute S, P and dP twice). Atomics make dq's last bits depend on
// the order blocks finish: the deterministic mode takes the composition instead (nn/attention.cpp).
//
// Tile products: 16 x 16 x 16 tiles on tensor cores (nvcuda::wmma, f16/bf16 in, f32 out) for the
// 16-bit types, FMAs from shared memory in A for f32 and f64; the softmax, masks and dropout in A.
// Weights and dS are rounded to the 16-bit type for the tensor-core products, as FlashAttention does.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "cuda/accumulate.cuh"
#include "cuda/attention.h"
#include "cuda/error.h"
#include "tensor/philox.h"

namespace ember::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr unsigned kFullWarp = 0xffffffffu;

template <class T>
constexpr int kBytes = static_cast<int>(sizeof(T));

template <class A>
__device__ __forceinline__ A minus_infinity() {
  return -std::numeric_limits<A>::infinity();
}

// e^x: through exp2 in float (the special-function unit), exp in double.
__device__ __forceinline__ float exp_of(float x) { return exp2f(x * 1.4426950408889634f); }
__device__ __forceinline__ double exp_of(double x) { return std::exp(x); }

// x rounded to the storage type (round to nearest even, by the conversion instructions for 16-bit).
template <class T, class A>
__device__ __forceinline__ T to_storage(A x) {
  if constexpr (std::is_same_v<T, f16>)
    return f16::from_bits(__half_as_ushort(__float2half_rn(x)));
  else if constexpr (std::is_same_v<T, bf16>)
    return bf16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(x)));
  else
    return static_cast<T>(x);
}

// One warp's product of 16 x 16 tiles in shared memory, acc (in A) += a b: a's element (r, k) at
// a[r * lda + k], or a[k * lda + r] when kTrans (the tile of a transposed matrix); b's (k, c) at
// b[k * ldb + c], or b[c * ldb + k] when kTrans. Accumulator tiles load from and store to A rows.
//
// FmaTile: any T, in A. Lane l holds row l / 2, columns (l % 2) * 8 + [0, 8) of the accumulator.
template <class T>
struct FmaTile {
  using A = float_acc_t<T>;
  struct Acc {
    A x[8];
  };
  template <bool kTrans>
  struct Operand {
    const T* p;
    unsigned ld;
  };
  template <bool kTrans>
  using OperandA = Operand<kTrans>;
  template <bool kTrans>
  using OperandB = Operand<kTrans>;

  static __device__ __forceinline__ int row() { return static_cast<int>(threadIdx.x % 32) / 2; }
  static __device__ __forceinline__ int column() { return static_cast<int>(threadIdx.x % 2) * 8; }
  static __device__ __forceinline__ void zero(Acc& c) {
#pragma unroll
    for (int j = 0; j < 8; ++j) c.x[j] = 0;
  }
  static __device__ __forceinline__ void load(Acc& c, const A* p, unsigned ld) {
    const A* src = p + row() * ld + column();
#pragma unroll
    for (int j = 0; j < 8; ++j) c.x[j] = src[j];
  }
  static __device__ __forceinline__ void store(A* p, unsigned ld, const Acc& c) {
    A* dst = p + row() * ld + column();
#pragma unroll
    for (int j = 0; j < 8; ++j) dst[j] = c.x[j];
  }
  template <bool kTrans>
  static __device__ __forceinline__ void load_operand(Operand<kTrans>& f, const T* p, unsigned ld) {
    f = {p, ld};
  }
  template <bool kTransA, bool kTransB>
  static __device__ __forceinline__ void mma(Acc& c, const Operand<kTransA>& a, const Operand<kTransB>& b) {
    const int r = row(), c0 = column();
#pragma unroll 4
    for (int k = 0; k < 16; ++k) {
      const A x = load_as<A>(kTransA ? a.p[k * a.ld + r] : a.p[r * a.ld + k]);
#pragma unroll
      for (int j = 0; j < 8; ++j) c.x[j] += x * load_as<A>(kTransB ? b.p[(c0 + j) * b.ld + k] : b.p[k * b.ld + c0 + j]);
    }
  }
};

// WmmaTile: f16 and bf16 on tensor cores (sm_80 and later for bf16), f32 accumulators.
template <class T>
struct WmmaTile {
  using A = float;
  using W = std::conditional_t<std::is_same_v<T, f16>, __half, __nv_bfloat16>;  // the same bits as T
  using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  template <bool kTrans>
  using Layout = std::conditional_t<kTrans, wmma::col_major, wmma::row_major>;
  template <bool kTrans>
  using OperandA = wmma::fragment<wmma::matrix_a, 16, 16, 16, W, Layout<kTrans>>;
  template <bool kTrans>
  using OperandB = wmma::fragment<wmma::matrix_b, 16, 16, 16, W, Layout<kTrans>>;

  static __device__ __forceinline__ void zero(Acc& c) { wmma::fill_fragment(c, 0.0f); }
  static __device__ __forceinline__ void load(Acc& c, const float* p, unsigned ld) {
    wmma::load_matrix_sync(c, p, ld, wmma::mem_row_major);
  }
  static __device__ __forceinline__ void store(float* p, unsigned ld, const Acc& c) {
    wmma::store_matrix_sync(p, c, ld, wmma::mem_row_major);
  }
  template <class Fragment>
  static __device__ __forceinline__ void load_operand(Fragment& f, const T* p, unsigned ld) {
    wmma::load_matrix_sync(f, reinterpret_cast<const W*>(p), ld);
  }
  template <class FragmentA, class FragmentB>
  static __device__ __forceinline__ void mma(Acc& c, const FragmentA& a, const FragmentB& b) {
    wmma::mma_sync(c, a, b, c);
  }
};

// Tensor cores for the 16-bit types where the target has bf16 WMMA; FMAs otherwise.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
template <class T>
using TileOps = FmaTile<T>;
#else
template <class T>
using TileOps = std::conditional_t<is_reduced_float_v<T>, WmmaTile<T>, FmaTile<T>>;
#endif

// acc[x] += a (16 x 16 kts) b (16 kts x 16) for the column tiles ct = first + x * step of b, x < count
// (<= kN). a points at the row panel's first element, b at its first row and column.
template <class Ops, bool kTransA, bool kTransB, int kN, class T>
__device__ __forceinline__ void mma_tiles(typename Ops::Acc (&acc)[kN], int count, int first, int step, int kts,
                                          const T* a, unsigned lda, const T* b, unsigned ldb) {
  for (int kt = 0; kt < kts; ++kt) {
    typename Ops::template OperandA<kTransA> fa;
    Ops::load_operand(fa, a + (kTransA ? 16 * kt * lda : 16 * kt), lda);
#pragma unroll
    for (int x = 0; x < kN; ++x)
      if (x < count) {
        const unsigned ct = first + x * step;
        typename Ops::template OperandB<kTransB> fb;
        Ops::load_operand(fb, b + (kTransB ? 16 * ct * ldb + 16 * kt : 16 * kt * ldb + 16 * ct), ldb);
        Ops::mma(acc[x], fa, fb);
      }
  }
}

// c (16 x 16 nt, A rows in shared memory) = a b, or += a b when `accumulate`: one warp's row panel,
// four column tiles at a time.
template <class Ops, bool kTransA, bool kTransB, class T, class A>
__device__ __forceinline__ void panel(bool accumulate, A* c, unsigned ldc, int nt, int kts, const T* a, unsigned lda,
                                      const T* b, unsigned ldb) {
  constexpr int kGroup = 4;
  for (int c0 = 0; c0 < nt; c0 += kGroup) {
    const int count = nt - c0 < kGroup ? nt - c0 : kGroup;
    typename Ops::Acc acc[kGroup];
#pragma unroll
    for (int x = 0; x < kGroup; ++x)
      if (x < count) {
        if (accumulate)
          Ops::load(acc[x], c + 16 * (c0 + x), ldc);
        else
          Ops::zero(acc[x]);
      }
    mma_tiles<Ops, kTransA, kTransB>(acc, count, c0, 1, kts, a, lda, b, ldb);
#pragma unroll
    for (int x = 0; x < kGroup; ++x)
      if (x < count) Ops::store(c + 16 * (c0 + x), ldc, acc[x]);
  }
}

// A tile of `rows` rows into shared memory (row r at dst + r * ld, `padded` elements): the first
// `valid` rows from src (rows of `cols` contiguous elements), zeros elsewhere. The whole block.
// `vector`: 16-byte loads (cols a multiple of them, src aligned).
template <class T>
__device__ void load_tile(T* dst, int ld, const T* src, int rows, int valid, int cols, int padded, bool vector) {
  if (vector) {
    constexpr int kWidth = 16 / static_cast<int>(sizeof(T));
    const int chunks = padded / kWidth;
    for (int x = static_cast<int>(threadIdx.x); x < rows * chunks; x += static_cast<int>(blockDim.x)) {
      const int r = x / chunks, c = x % chunks * kWidth;
      uint4 w = make_uint4(0, 0, 0, 0);
      if (r < valid && c < cols) w = *reinterpret_cast<const uint4*>(src + static_cast<int64_t>(r) * cols + c);
      *reinterpret_cast<uint4*>(dst + r * ld + c) = w;
    }
  } else {
    for (int x = static_cast<int>(threadIdx.x); x < rows * padded; x += static_cast<int>(blockDim.x)) {
      const int r = x / padded, c = x % padded;
      dst[r * ld + c] = r < valid && c < cols ? src[static_cast<int64_t>(r) * cols + c] : T{};
    }
  }
}

// How many of rows [start, start + most) lie below `total`.
__device__ __forceinline__ int rows_below(int64_t total, int64_t start, int most) {
  return static_cast<int>(total - start < most ? total - start : most);
}

// Rows [first, first + valid) of x (., E) and y (., Ev), both from the inputs' rows of the same index
// (k and v, or q and g), into the tiles xs and ys of `rows` rows. The whole block.
template <class T>
__device__ __forceinline__ void load_pair(const AttentionArgs& a, const AttentionPlan& plan, T* xs, const void* x,
                                          T* ys, const void* y, int64_t first, int rows, int valid) {
  load_tile(xs, plan.ld_qk, static_cast<const T*>(x) + first * a.E, rows, valid, static_cast<int>(a.E), plan.e16,
            a.vector_loads);
  load_tile(ys, plan.ld_v, static_cast<const T*>(y) + first * a.Ev, rows, valid, static_cast<int>(a.Ev), plan.ev16,
            a.vector_loads);
}

// The score rules of one batch entry n, as cpu/attention.cpp's RowMask applies them: a bool mask
// (false: out), an additive one, the causal one (key j > query i out); -inf beyond the queries and keys.
template <class T>
struct ScoreRules {
  using A = float_acc_t<T>;
  const bool* keep = nullptr;
  const T* add = nullptr;
  int64_t sl = 0, ss = 0, L = 0, S = 0;
  A scale = 1;
  bool causal = false;

  __device__ ScoreRules(const AttentionArgs& a, int64_t n)
      : sl(a.mask_sl), ss(a.mask_ss), L(a.L), S(a.S), scale(static_cast<A>(a.scale)), causal(a.causal) {
    if (a.mask == nullptr) return;
    int64_t offset = 0;  // entry n of the mask's (B..., L, S) layout
    for (int d = a.mask_dims - 1; d >= 0; --d) {
      offset += n % a.mask_sizes[d] * a.mask_strides[d];
      n /= a.mask_sizes[d];
    }
    if (a.mask_bool)
      keep = static_cast<const bool*>(a.mask) + offset;
    else
      add = static_cast<const T*>(a.mask) + offset;
  }
  // The score of query i and key j from their dot product.
  __device__ __forceinline__ A score(A dot, int64_t i, int64_t j) const {
    if (i >= L || j >= S) return minus_infinity<A>();
    A s = dot * scale;
    if (keep) {
      if (!keep[i * sl + j * ss]) s = minus_infinity<A>();
    } else if (add) {
      s += load_as<A>(add[i * sl + j * ss]);
    }
    if (causal && j > i) s = minus_infinity<A>();
    return s;
  }
};

// Dropout's factors (dropout_scale kept, else 0) of the elements c = lane + 32 e of a row's key tile,
// flat indices base + c, base = (n L + i) S + j0. rand()'s f32 for flat index x is word x % 4 of Philox
// block first_block + x / 4 of the resolved counter, to_unit_float<24> (cpu/random.cpp, cuda/random.cu),
// kept when >= p: lane l draws block first_block + base / 4 + l and the warp trades words by shuffles.
// The whole warp.
template <int kCols, class A>
__device__ __forceinline__ void dropout_factors(const AttentionArgs& a, uint64_t base, A (&z)[kCols]) {
  static_assert(kCols <= 2, "a warp's 32 blocks cover at most 125 consecutive elements");
  const int lane = static_cast<int>(threadIdx.x % 32);
  const philox::Counter c = a.counter.resolved();
  const philox::Block b = philox::generate(c.seed, c.first_block + base / 4 + static_cast<uint64_t>(lane));
  const int skip = static_cast<int>(base % 4);
#pragma unroll
  for (int e = 0; e < kCols; ++e) {
    const int x = lane + 32 * e + skip, from = x / 4, word = x % 4;
    const uint32_t w0 = __shfl_sync(kFullWarp, b.v[0], from), w1 = __shfl_sync(kFullWarp, b.v[1], from);
    const uint32_t w2 = __shfl_sync(kFullWarp, b.v[2], from), w3 = __shfl_sync(kFullWarp, b.v[3], from);
    const uint32_t u = word == 0 ? w0 : word == 1 ? w1 : word == 2 ? w2 : w3;
    z[e] = philox::to_unit_float<24>(u) >= a.dropout_p ? static_cast<A>(a.dropout_scale) : A(0);
  }
}

// The tiles of a plan in the block's shared memory (attention_plan says which each direction uses).
template <class T>
struct SharedTiles {
  using A = float_acc_t<T>;
  T *q, *k, *v, *g, *p, *ds;
  A *s, *dp, *o, *m, *l, *d;
  __device__ SharedTiles(const AttentionPlan& plan, unsigned char* smem)
      : q(reinterpret_cast<T*>(smem + plan.q)), k(reinterpret_cast<T*>(smem + plan.k)),
        v(reinterpret_cast<T*>(smem + plan.v)), g(reinterpret_cast<T*>(smem + plan.g)),
        p(reinterpret_cast<T*>(smem + plan.p)), ds(reinterpret_cast<T*>(smem + plan.ds)),
        s(reinterpret_cast<A*>(smem + plan.s)), dp(reinterpret_cast<A*>(smem + plan.dp)),
        o(reinterpret_cast<A*>(smem + plan.o)), m(reinterpret_cast<A*>(smem + plan.m)),
        l(reinterpret_cast<A*>(smem + plan.l)),
        d(reinterpret_cast<A*>(smem + plan.d)) {}
};

// s = q k^T on the warp's 16 rows from r0 (16 x Bc): the scores before scale and masks.
template <class Ops, int kBc, class T>
__device__ __forceinline__ void score_rows(const SharedTiles<T>& sm, const AttentionPlan& plan, int r0) {
  panel<Ops, false, true>(false, sm.s + r0 * plan.ld_s, plan.ld_s, kBc / 16, plan.e16 / 16, sm.q + r0 * plan.ld_qk,
                          plan.ld_qk, sm.k, plan.ld_qk);
}

template <class T>
__global__ void __launch_bounds__(kAttentionThreads) attention_forward_kernel(const AttentionArgs a) {
  using A = float_acc_t<T>;
  using Ops = TileOps<T>;
  constexpr int kBr = kAttentionQueryTile, kBc = attention_key_tile(kBytes<T>), kCols = (kBc + 31) / 32;
  const AttentionPlan plan = attention_plan(kBytes<T>, kBytes<A>, a.E, a.Ev, false);
  extern __shared__ __align__(128) unsigned char smem[];
  const SharedTiles<T> sm(plan, smem);

  // Blocks of one batch entry are neighbours (they share k and v); the last query tiles, which see
  // the most keys under the causal mask, start first.
  const int64_t tiles = (a.L + kBr - 1) / kBr;
  const int64_t n = blockIdx.x / tiles, i0 = (tiles - 1 - blockIdx.x % tiles) * kBr;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32), r0 = 16 * warp;
  const int queries = rows_below(a.L, i0, kBr);
  load_tile(sm.q, plan.ld_qk, static_cast<const T*>(a.q) + (n * a.L + i0) * a.E, kBr, queries, static_cast<int>(a.E),
            plan.e16, a.vector_loads);
  for (int x = static_cast<int>(threadIdx.x); x < kBr * plan.ld_o; x += kAttentionThreads) sm.o[x] = 0;
  if (threadIdx.x < kBr) {
    sm.m[threadIdx.x] = minus_infinity<A>();
    sm.l[threadIdx.x] = 0;
  }
  __syncthreads();  // a row's o, m and l are set by other warps (and read before any key tile when S = 0)
  const ScoreRules<T> rules(a, n);
  const int64_t key_end = a.causal && i0 + kBr < a.S ? i0 + kBr : a.S;  // causal: no key after the last query
  for (int64_t j0 = 0; j0 < key_end; j0 += kBc) {
    __syncthreads();  // every warp is done with the last tile's k and v
    load_pair(a, plan, sm.k, a.k, sm.v, a.v, n * a.S + j0, kBc, rows_below(a.S, j0, kBc));
    __syncthreads();
    // The warp's 16 rows from here on.
    score_rows<Ops, kBc>(sm, plan, r0);
    __syncwarp();
    // A row at a time, lanes across the keys: the new max, the weights e^(s - m_new) (summed before
    // dropout, as softmax then dropout), the accumulator's rescaling e^(m_old - m_new).
    for (int rr = 0; rr < 16; ++rr) {
      const int r = r0 + rr;
      const int64_t i = i0 + r;
      A w[kCols];
      A row_max = minus_infinity<A>();
#pragma unroll
      for (int e = 0; e < kCols; ++e) {
        const int c = lane + 32 * e;
        w[e] = c < kBc ? rules.score(sm.s[r * plan.ld_s + c], i, j0 + c) : minus_infinity<A>();
        row_max = MaxOp{}(row_max, w[e]);
      }
      row_max = group_all_reduce<false>(row_max, MaxOp{}, static_cast<A*>(nullptr));
      // m[r] and l[r] are read by every lane before the shuffles below, written by lane 0 after them.
      const A m_old = sm.m[r], m_new = MaxOp{}(m_old, row_max);
      A alpha = 1, sum = 0;
      if (m_new != minus_infinity<A>()) {  // else no key of this row takes part yet: weights 0
        alpha = exp_of(m_old - m_new);     // 0 on the row's first tile with a key
#pragma unroll
        for (int e = 0; e < kCols; ++e) sum += w[e] = exp_of(w[e] - m_new);
      } else {
#pragma unroll
        for (int e = 0; e < kCols; ++e) w[e] = 0;
      }
      sum = group_all_reduce<false>(sum, AddOp{}, static_cast<A*>(nullptr));
      if (a.dropout_p > 0) {
        A z[kCols];
        dropout_factors(a, static_cast<uint64_t>((n * a.L + i) * a.S + j0), z);
#pragma unroll
        for (int e = 0; e < kCols; ++e) w[e] *= z[e];
      }
#pragma unroll
      for (int e = 0; e < kCols; ++e)
        if (lane + 32 * e < kBc) sm.p[r * plan.ld_p + lane + 32 * e] = to_storage<T>(w[e]);
      if (alpha != A(1))
        for (int c = lane; c < a.Ev; c += 32) sm.o[r * plan.ld_o + c] *= alpha;
      if (lane == 0) {
        sm.m[r] = m_new;
        sm.l[r] = sm.l[r] * alpha + sum;
      }
    }
    __syncwarp();
    // o += p v (16 x Ev)
    panel<Ops, false, false>(true, sm.o + r0 * plan.ld_o, plan.ld_o, plan.ev16 / 16, kBc / 16, sm.p + r0 * plan.ld_p,
                             plan.ld_p, sm.v, plan.ld_v);
  }
  __syncwarp();
  // out = o / l; stats = (m, l), m +inf on a row whose keys are all masked (its output 0).
  for (int rr = 0; rr < 16 && r0 + rr < queries; ++rr) {
    const int r = r0 + rr;
    const int64_t row = n * a.L + i0 + r;
    const A sum = sm.l[r];
    const A inv = sum == A(0) ? A(0) : A(1) / sum;
    T* out = static_cast<T*>(a.out) + row * a.Ev;
    for (int c = lane; c < a.Ev; c += 32) out[c] = to_storage<T>(sm.o[r * plan.ld_o + c] * inv);
    if (lane == 0) {
      A* stats = static_cast<A*>(a.stats) + 2 * row;
      stats[0] = sum == A(0) ? std::numeric_limits<A>::infinity() : sm.m[r];
      stats[1] = sum;
    }
  }
}

// d = rowsum(g * out) over Ev: a warp per row of the (N, L) rows, summed in double: ds = P (dP - d)
// cancels where a row's weights are near one-hot, so d's rounding reaches dq and dk.
template <class T>
__global__ void __launch_bounds__(kThreads) attention_delta_kernel(const AttentionArgs a) {
  using A = float_acc_t<T>;
  const int64_t rows = a.N * a.L, warps = int64_t{gridDim.x} * (blockDim.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t row = int64_t{blockIdx.x} * (blockDim.x / 32) + threadIdx.x / 32; row < rows; row += warps) {
    const T* g = static_cast<const T*>(a.g) + row * a.Ev;
    const T* out = static_cast<const T*>(a.out) + row * a.Ev;
    double sum = 0;
    for (int64_t c = lane; c < a.Ev; c += 32) sum += load_as<double>(g[c]) * load_as<double>(out[c]);
    sum = group_all_reduce<false>(sum, AddOp{}, static_cast<double*>(nullptr));
    if (lane == 0) static_cast<A*>(a.d)[row] = static_cast<A>(sum);
  }
}

// One key tile of one batch entry against every query tile that sees it. kHeadTiles: the most
// 16-column tiles of E and Ev (4 or 8), which fixes how many accumulator tiles dk and dv hold.
template <class T, int kHeadTiles>
__global__ void __launch_bounds__(kAttentionThreads) attention_backward_kernel(const AttentionArgs a) {
  using A = float_acc_t<T>;
  using Ops = TileOps<T>;
  constexpr int kBr = kAttentionQueryTile, kBc = attention_key_tile(kBytes<T>), kCols = (kBc + 31) / 32;
  // dk and dv (Bc x E, Bc x Ev): warp w takes row tile w % kRowTiles, column tiles w / kRowTiles + x kStep.
  constexpr int kRowTiles = kBc / 16, kStep = kAttentionWarps / kRowTiles;
  constexpr int kFrags = (kHeadTiles + kStep - 1) / kStep;
  const AttentionPlan plan = attention_plan(kBytes<T>, kBytes<A>, a.E, a.Ev, true);
  extern __shared__ __align__(128) unsigned char smem[];
  const SharedTiles<T> sm(plan, smem);  // o lies over s and dp: dq's tile, then dk's and dv's

  const int64_t tiles = (a.S + kBc - 1) / kBc;
  const int64_t n = blockIdx.x / tiles, j0 = blockIdx.x % tiles * kBc;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32), r0 = 16 * warp;
  const int keys = rows_below(a.S, j0, kBc);
  load_pair(a, plan, sm.k, a.k, sm.v, a.v, n * a.S + j0, kBc, keys);

  const int rt = warp % kRowTiles, ct0 = warp / kRowTiles;
  auto tiles_of = [ct0](int width16) { return ct0 < width16 / 16 ? (width16 / 16 - ct0 + kStep - 1) / kStep : 0; };
  const int dk_tiles = tiles_of(plan.e16), dv_tiles = tiles_of(plan.ev16);
  typename Ops::Acc dk[kFrags], dv[kFrags];
#pragma unroll
  for (int x = 0; x < kFrags; ++x) {
    Ops::zero(dk[x]);
    Ops::zero(dv[x]);
  }
  const ScoreRules<T> rules(a, n);
  const A scale = static_cast<A>(a.scale);
  // Causal: query tiles before the first one with a query at or after key j0 see none of these keys.
  for (int64_t i0 = a.causal ? j0 / kBr * kBr : 0; i0 < a.L; i0 += kBr) {
    __syncthreads();  // every warp is done with the last query tile (the first time: k and v are loaded)
    const int queries = rows_below(a.L, i0, kBr);
    load_pair(a, plan, sm.q, a.q, sm.g, a.g, n * a.L + i0, kBr, queries);
    if (threadIdx.x < kBr) {  // m: the row max; l: 1 / the row sum, 0 on dead rows and rows past L
      const int r = static_cast<int>(threadIdx.x);
      const A* stats = static_cast<const A*>(a.stats) + 2 * (n * a.L + i0 + r);
      sm.m[r] = r < queries ? stats[0] : std::numeric_limits<A>::infinity();
      sm.l[r] = r < queries && stats[1] != A(0) ? A(1) / stats[1] : A(0);
      sm.d[r] = r < queries ? static_cast<const A*>(a.d)[n * a.L + i0 + r] : A(0);
    }
    __syncthreads();
    // The warp's 16 query rows: s = q k^T and dp = g v^T (16 x Bc), then a row at a time
    // P = e^(s - m) / l (0 where m is +inf), p = P Z and ds = P (Z dp - D), both rounded to T.
    score_rows<Ops, kBc>(sm, plan, r0);
    panel<Ops, false, true>(false, sm.dp + r0 * plan.ld_s, plan.ld_s, kBc / 16, plan.ev16 / 16, sm.g + r0 * plan.ld_v,
                            plan.ld_v, sm.v, plan.ld_v);
    __syncwarp();
    for (int rr = 0; rr < 16; ++rr) {
      const int r = r0 + rr;
      const int64_t i = i0 + r;
      A z[kCols];
#pragma unroll
      for (int e = 0; e < kCols; ++e) z[e] = 1;
      if (a.dropout_p > 0) dropout_factors(a, static_cast<uint64_t>((n * a.L + i) * a.S + j0), z);
#pragma unroll
      for (int e = 0; e < kCols; ++e) {
        const int c = lane + 32 * e;
        if (c >= kBc) continue;
        const A weight = exp_of(rules.score(sm.s[r * plan.ld_s + c], i, j0 + c) - sm.m[r]) * sm.l[r];
        sm.p[r * plan.ld_p + c] = to_storage<T>(weight * z[e]);
        sm.ds[r * plan.ld_p + c] = to_storage<T>(weight * (sm.dp[r * plan.ld_s + c] * z[e] - sm.d[r]));
      }
    }
    __syncthreads();  // p and ds complete; s and dp read by no one from here on
    // dv += p^T g and dk += ds^T q (scaled at the end) on this warp's tiles of the key rows.
    mma_tiles<Ops, true, false>(dv, dv_tiles, ct0, kStep, kBr / 16, sm.p + 16 * rt, plan.ld_p, sm.g, plan.ld_v);
    mma_tiles<Ops, true, false>(dk, dk_tiles, ct0, kStep, kBr / 16, sm.ds + 16 * rt, plan.ld_p, sm.q, plan.ld_qk);
    // dq's tile for the warp's query rows, ds k (16 x E), into o, then added to dq_accum times scale.
    panel<Ops, false, false>(false, sm.o + r0 * plan.ld_o, plan.ld_o, plan.e16 / 16, kBc / 16, sm.ds + r0 * plan.ld_p,
                             plan.ld_p, sm.k, plan.ld_qk);
    __syncwarp();
    for (int rr = 0; rr < 16 && r0 + rr < queries; ++rr) {
      A* dq = static_cast<A*>(a.dq_accum) + (n * a.L + i0 + r0 + rr) * a.E;
      for (int c = lane; c < a.E; c += 32) atomicAdd(dq + c, sm.o[(r0 + rr) * plan.ld_o + c] * scale);
    }
  }
  // dk (times scale) and dv through o: each warp stores its tiles, then the block writes the rows.
  auto write = [&](const typename Ops::Acc (&acc)[kFrags], int count, int cols, A factor, void* dst) {
    __syncthreads();  // o is free
#pragma unroll
    for (int x = 0; x < kFrags; ++x)
      if (x < count) Ops::store(sm.o + 16 * rt * plan.ld_o + 16 * (ct0 + x * kStep), plan.ld_o, acc[x]);
    __syncthreads();
    T* out = static_cast<T*>(dst) + (n * a.S + j0) * cols;
    for (int x = static_cast<int>(threadIdx.x); x < keys * cols; x += kAttentionThreads)
      out[x] = to_storage<T>(sm.o[x / cols * plan.ld_o + x % cols] * factor);
  };
  write(dk, dk_tiles, static_cast<int>(a.E), scale, a.dk);
  write(dv, dv_tiles, static_cast<int>(a.Ev), A(1), a.dv);
}

// Raises the block's shared-memory limit where the kernel needs more than the default 48 KB, then
// launches it.
template <class Kernel>
void launch(Kernel kernel, int64_t blocks, int threads, size_t shared, const AttentionArgs& a, cudaStream_t stream) {
  if (blocks == 0) return;
  if (blocks > 0x7fffffff)
    throw ValueError("scaled_dot_product_attention on CUDA: " + std::to_string(blocks) +
                     " blocks are too many for one grid");
  if (shared > 48 * 1024)
    EMBER_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  kernel<<<static_cast<unsigned>(blocks), threads, shared, stream>>>(a);
  EMBER_CUDA_LAUNCH_CHECK();
}

}  // namespace

size_t attention_shared_bytes(DType dtype, int64_t E, int64_t Ev, bool backward) {
  return visit_floating(dtype, "scaled_dot_product_attention", [&]<class T>() {
    return attention_plan(kBytes<T>, kBytes<float_acc_t<T>>, E, Ev, backward).bytes;
  });
}

void launch_attention_forward(DType dtype, const AttentionArgs& a, cudaStream_t stream) {
  visit_floating(dtype, "scaled_dot_product_attention", [&]<class T>() {
    const size_t shared = attention_plan(kBytes<T>, kBytes<float_acc_t<T>>, a.E, a.Ev, false).bytes;
    launch(attention_forward_kernel<T>, a.N * ((a.L + kAttentionQueryTile - 1) / kAttentionQueryTile),
           kAttentionThreads, shared, a, stream);
  });
}

void launch_attention_backward(DType dtype, const AttentionArgs& a, cudaStream_t stream) {
  visit_floating(dtype, "scaled_dot_product_attention_backward", [&]<class T>() {
    using A = float_acc_t<T>;
    if (a.N * a.L * a.E > 0)
      EMBER_CUDA_CHECK(cudaMemsetAsync(a.dq_accum, 0, static_cast<size_t>(a.N * a.L * a.E) * sizeof(A), stream));
    if (a.N * a.L > 0) {
      attention_delta_kernel<T><<<grid_blocks(a.N * a.L * 32, kThreads), kThreads, 0, stream>>>(a);
      EMBER_CUDA_LAUNCH_CHECK();
    }
    const size_t shared = attention_plan(kBytes<T>, kBytes<A>, a.E, a.Ev, true).bytes;
    const int64_t blocks = a.N * ((a.S + attention_key_tile(kBytes<T>) - 1) / attention_key_tile(kBytes<T>));
    if (a.E > 64 || a.Ev > 64)
      launch(attention_backward_kernel<T, 8>, blocks, kAttentionThreads, shared, a, stream);
    else
      launch(attention_backward_kernel<T, 4>, blocks, kAttentionThreads, shared, a, stream);
  });
}

}  // namespace ember::cuda

// ember's deterministic GEMM (cpu/gemm.h, deterministic_gemm): every element of C is its products
// added one at a time in the order k = 0, 1, ..., K-1, onto zero (beta 0) or onto C (beta 1), each
// multiply and each add rounded on its own (no FMA: the build passes -ffp-contract=off). The
// vector lanes run across columns of C, so each lane does exactly that scalar sequence; blocks along
// k keep the running sum in C between them, in T, as a register would; threads split C's tiles. So
// the bits depend on neither the thread count nor the block sizes nor the instruction set: SSE2,
// AVX2 and AVX-512 kernels (picked at run time) give identical results.
// The structure is Goto's (Goto & van de Geijn, "Anatomy of high-performance matrix multiplication",
// ACM TOMS 34(3), 2008): panels of A and B packed contiguous, a register tile of MR x NR outputs.
#include <sys/platform/x86.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/gemm.h"
#include "cpu/parallel.h"
#include "tensor/error.h"

namespace ember::cpu {

namespace {

// Block sizes: a packed kKc x kNc block of B (384 KiB of f32) and kMc x kKc of A (144 KiB) stay in
// L2 while the register tiles sweep them. They change the speed only, never a bit of the result
// (measured on Zen 4, one thread, n = 1024: kKc 64..256 and kMc 96..384 all ran within 10%).
constexpr int64_t kKc = 192;
constexpr int64_t kMc = 192;
constexpr int64_t kNc = 512;

// W lanes of T (GCC's vector extension: the arithmetic is elementwise IEEE, one rounding per op).
template <class T, int W>
using Vec [[gnu::vector_size(W * sizeof(T))]] = T;

// The register tile: C[0, MR) x [0, NV * W) at c (row stride ldc) += the kc products of a packed A
// panel (ap[p * MR + i]) and B panel (bp[p * NR + j]); load: start from C, else from zero. Vectors
// move by memcpy (unaligned loads), never by value through a call: a default-target function
// taking one would be compiled for another ABI than the AVX kernels that inline this.
template <class T, int W, int MR, int NV>
[[gnu::always_inline]] inline void tile(int64_t kc, const T* ap, const T* bp, T* c, int64_t ldc, bool load_c) {
  using V = Vec<T, W>;
  constexpr int NR = NV * W;
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) {
      acc[i][v] = V{};
      if (load_c) std::memcpy(&acc[i][v], c + i * ldc + v * W, sizeof(V));
    }
  for (int64_t p = 0; p < kc; ++p) {
    V b[NV];
    for (int v = 0; v < NV; ++v) std::memcpy(&b[v], bp + p * NR + v * W, sizeof(V));
    for (int i = 0; i < MR; ++i) {
      const T a = ap[p * MR + i];
      for (int v = 0; v < NV; ++v) acc[i][v] += b[v] * a;
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) std::memcpy(c + i * ldc + v * W, &acc[i][v], sizeof(V));
}

// C block (mc x nc at c) from packed A (mc rows in MR-row panels) and B (nc columns in NR-column
// panels), kc long. Partial tiles go through a full-size copy, whose padding lanes are thrown away.
template <class T, int W, int MR, int NV>
[[gnu::always_inline]] inline void block(int64_t mc, int64_t nc, int64_t kc, const T* ap, const T* bp, T* c,
                                         int64_t ldc, bool load_c) {
  constexpr int NR = NV * W;
  for (int64_t j = 0; j < nc; j += NR)
    for (int64_t i = 0; i < mc; i += MR) {
      const T* a = ap + i * kc;
      const T* b = bp + j * kc;
      T* ct = c + i * ldc + j;
      const int64_t rows = std::min<int64_t>(MR, mc - i), cols = std::min<int64_t>(NR, nc - j);
      if (rows == MR && cols == NR) {
        tile<T, W, MR, NV>(kc, a, b, ct, ldc, load_c);
        continue;
      }
      T edge[MR * NR] = {};
      if (load_c)
        for (int64_t r = 0; r < rows; ++r) std::copy(ct + r * ldc, ct + r * ldc + cols, edge + r * NR);
      tile<T, W, MR, NV>(kc, a, b, edge, NR, load_c);
      for (int64_t r = 0; r < rows; ++r) std::copy(edge + r * NR, edge + r * NR + cols, ct + r * ldc);
    }
}

// One instantiation of `block` per instruction set. MR x NV vectors of accumulators plus NV of B
// and a broadcast fill most of the vector registers (16 for SSE2 and AVX2, 32 for AVX-512); on
// Zen 4 at n = 1024 AVX-512's 6 x 4 beat 12 x 2 and 14 x 2 (70 against 59 GFLOP/s on one thread).
template <class T>
using BlockFn = void (*)(int64_t, int64_t, int64_t, const T*, const T*, T*, int64_t, bool);

template <class T>
void block_sse2(int64_t mc, int64_t nc, int64_t kc, const T* ap, const T* bp, T* c, int64_t ldc, bool load_c) {
  block<T, 16 / sizeof(T), 6, 2>(mc, nc, kc, ap, bp, c, ldc, load_c);
}
template <class T>
[[gnu::target("avx2")]] void block_avx2(int64_t mc, int64_t nc, int64_t kc, const T* ap, const T* bp, T* c,
                                        int64_t ldc, bool load_c) {
  block<T, 32 / sizeof(T), 6, 2>(mc, nc, kc, ap, bp, c, ldc, load_c);
}
template <class T>
[[gnu::target("avx512f")]] void block_avx512(int64_t mc, int64_t nc, int64_t kc, const T* ap, const T* bp, T* c,
                                             int64_t ldc, bool load_c) {
  block<T, 64 / sizeof(T), 6, 4>(mc, nc, kc, ap, bp, c, ldc, load_c);
}

// The tile shape of each kernel, for packing: MR rows, NR columns.
struct TileShape {
  int64_t mr, nr;
};

template <class T>
TileShape tile_shape(GemmIsa isa) {
  const int64_t lanes = (isa == GemmIsa::avx512 ? 64 : isa == GemmIsa::avx2 ? 32 : 16) / int64_t{sizeof(T)};
  return {6, (isa == GemmIsa::avx512 ? 4 : 2) * lanes};
}

template <class T>
BlockFn<T> block_kernel(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::avx512: return block_avx512<T>;
    case GemmIsa::avx2: return block_avx2<T>;
    case GemmIsa::sse2: break;
  }
  return block_sse2<T>;
}

// Rows [i0, i0 + mc) and k [p0, p0 + kc) of A into panels of mr rows: out[panel][p][r], zero past mc.
template <class T>
void pack_a(const Matrix<const T>& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t mr, T* out) {
  for (int64_t i = 0; i < mc; i += mr, out += mr * kc) {
    const int64_t rows = std::min(mr, mc - i);
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t r = 0; r < mr; ++r) {
        const int64_t row = i0 + i + r, col = p0 + p;
        out[p * mr + r] = r < rows ? (a.transposed ? a.p[col * a.ld + row] : a.p[row * a.ld + col]) : T(0);
      }
  }
}

// k [p0, p0 + kc) and columns [j0, j0 + nc) of B into panels of nr columns: out[panel][p][j], zero past nc.
template <class T>
void pack_b(const Matrix<const T>& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, T* out) {
  for (int64_t j = 0; j < nc; j += nr, out += nr * kc) {
    const int64_t cols = std::min(nr, nc - j);
    for (int64_t p = 0; p < kc; ++p) {
      T* dst = out + p * nr;
      const int64_t row = p0 + p, col = j0 + j;
      if (!b.transposed) {
        std::copy(b.p + row * b.ld + col, b.p + row * b.ld + col + cols, dst);
      } else {
        for (int64_t q = 0; q < cols; ++q) dst[q] = b.p[(col + q) * b.ld + row];
      }
      std::fill(dst + cols, dst + nr, T(0));
    }
  }
}

}  // namespace

GemmIsa best_gemm_isa() {
  // glibc's view of the CPU: it honours GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,... as libm does,
  // so one setting makes both act as on an older CPU (the tests use it).
  static const GemmIsa best = CPU_FEATURE_ACTIVE(AVX512F) ? GemmIsa::avx512
                              : CPU_FEATURE_ACTIVE(AVX2)  ? GemmIsa::avx2
                                                          : GemmIsa::sse2;
  return best;
}

template <class T>
void deterministic_gemm(int64_t m, int64_t n, int64_t k, Matrix<const T> a, Matrix<const T> b, T beta,
                        Matrix<T> c, GemmIsa isa) {
  if (c.transposed) throw ValueError("deterministic_gemm: C must be row-major (gemm transposes the problem first)");
  if (isa > best_gemm_isa())
    throw ValueError("deterministic_gemm: this CPU cannot run the kernel of instruction set " +
                     std::to_string(static_cast<int>(isa)) + " (the best is " +
                     std::to_string(static_cast<int>(best_gemm_isa())) + ")");
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == T(0))
      for (int64_t i = 0; i < m; ++i) std::fill(c.p + i * c.ld, c.p + i * c.ld + n, T(0));
    return;
  }
  const TileShape ts = tile_shape<T>(isa);
  const BlockFn<T> kernel = block_kernel<T>(isa);
  const auto round_up = [](int64_t v, int64_t to) { return (v + to - 1) / to * to; };
  const auto blocks = [](int64_t len, int64_t block) { return (len + block - 1) / block; };
  // Tasks are (column block, row block) pairs; each packs its own panels, so no two threads share a
  // buffer or an element of C. Blocks shrink until every thread has a task (an MLP's 128 x 256
  // layer would otherwise be one): like the sizes themselves, that changes no bit of C.
  int64_t mc = std::min(kMc, round_up(m, ts.mr)), nc = std::min(kNc, round_up(n, ts.nr));
  const int64_t threads = max_threads();
  while (blocks(m, mc) * blocks(n, nc) < threads && (nc > ts.nr || mc > ts.mr)) {
    if (nc > ts.nr) nc = round_up(nc / 2, ts.nr);
    else mc = round_up(mc / 2, ts.mr);
  }
  const int64_t row_blocks = blocks(m, mc), col_blocks = blocks(n, nc);
  parallel_for(row_blocks * col_blocks, mc * nc * k, [&](int64_t begin, int64_t end) {
    thread_local std::vector<T> packed_a, packed_b;
    packed_a.resize(static_cast<size_t>(mc * kKc));
    packed_b.resize(static_cast<size_t>(nc * kKc));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t i0 = (t % row_blocks) * mc, j0 = (t / row_blocks) * nc;
      const int64_t rows = std::min(mc, m - i0), cols = std::min(nc, n - j0);
      for (int64_t p0 = 0; p0 < k; p0 += kKc) {
        const int64_t kc = std::min(kKc, k - p0);
        pack_b(b, p0, kc, j0, cols, ts.nr, packed_b.data());
        pack_a(a, i0, rows, p0, kc, ts.mr, packed_a.data());
        kernel(rows, cols, kc, packed_a.data(), packed_b.data(), c.p + i0 * c.ld + j0, c.ld, p0 > 0 || beta != T(0));
      }
    }
  });
}

template void deterministic_gemm<float>(int64_t, int64_t, int64_t, Matrix<const float>, Matrix<const float>, float,
                                        Matrix<float>, GemmIsa);
template void deterministic_gemm<double>(int64_t, int64_t, int64_t, Matrix<const double>, Matrix<const double>, double,
                                         Matrix<double>, GemmIsa);

}  // namespace ember::cpu

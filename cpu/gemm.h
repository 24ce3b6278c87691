// The one call into the GEMM library for every CPU kernel that multiplies matrices (matmul,
// linear, conv2d): CBLAS (OpenBLAS) for f32/f64 when ember was built with it, Eigen otherwise; in
// deterministic mode (tensor/deterministic.h) ember's own kernel for f32/f64.
#pragma once

#include <cstdint>
#include <optional>

namespace ember::cpu {

// A matrix as GEMM reads it in place: from p with leading dimension ld, row-major, or column-major
// (the transpose of a row-major matrix) when `transposed`.
template <class T>
struct Matrix {
  T* p;
  bool transposed;
  int64_t ld;
};

struct MatrixLayout {
  bool transposed;
  int64_t ld;
};

// How GEMM can read a rows x cols matrix with element strides (rs, cs) without a copy, if it can.
// The stride of a dim of size 1 is never used, so it may take whatever value fits.
std::optional<MatrixLayout> matrix_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

// C (m x n) = A (m x k) @ B (k x n) + beta * C, with beta 0 or 1. Integer types go through Eigen,
// computed in their unsigned twin: two's-complement wrapping without signed overflow, which is
// exact in any order, hence deterministic too. f32/f64 in deterministic mode: deterministic_gemm. Products
// larger than kSingleThreadedGemm are split across the threads unless called inside a parallel
// region; smaller ones run on the calling thread. Instantiated for float, double, int32_t, int64_t
// and uint8_t.
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, Matrix<const T> a, Matrix<const T> b, T beta, Matrix<T> c);

// The instruction sets deterministic_gemm has kernels for, narrowest first; all give the same bits.
enum class GemmIsa { sse2, avx2, avx512 };
// The widest one this CPU runs (as glibc sees it: GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F lowers it).
GemmIsa best_gemm_isa();

// C (m x n, row-major) = A @ B + beta * C (beta 0 or 1), each element the sum of its products in the
// order k = 0, 1, ..., K-1, added one by one onto 0 (or onto C), each operation rounded: the same
// bits on any thread count and with any `isa` this CPU runs (ValueError for one it cannot, or for a
// column-major C). Instantiated for float and double (cpu/gemm_deterministic.cpp).
template <class T>
void deterministic_gemm(int64_t m, int64_t n, int64_t k, Matrix<const T> a, Matrix<const T> b, T beta, Matrix<T> c,
                        GemmIsa isa);

// Multiply-adds up to which a GEMM runs on one thread: batches of such GEMMs are worth threading
// across the batch instead.
inline constexpr int64_t kSingleThreadedGemm = 65536 * 4;

}  // namespace ember::cpu

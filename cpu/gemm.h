// The one call into the GEMM library for every CPU kernel that multiplies matrices (matmul,
// conv2d): CBLAS (OpenBLAS) for f32/f64 when ember was built with it, Eigen otherwise.
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
// computed in their unsigned twin: two's-complement wrapping without signed overflow. Products
// larger than kSingleThreadedGemm are split across the threads unless called inside a parallel
// region; smaller ones run on the calling thread. Instantiated for float, double, int32_t, int64_t
// and uint8_t.
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, Matrix<const T> a, Matrix<const T> b, T beta, Matrix<T> c);

// Multiply-adds up to which a GEMM runs on one thread: batches of such GEMMs are worth threading
// across the batch instead.
inline constexpr int64_t kSingleThreadedGemm = 65536 * 4;

}  // namespace ember::cpu

// The CPU GEMM baseline: the BLAS library called directly (cblas_sgemm, or Eigen in a build without
// CBLAS, as meson's EMBER_HAVE_CBLAS says), and how many threads it gets for its phase of a case.
#pragma once

#include <functional>

namespace bench {

// The name of the library blas_sgemm calls ("cblas_sgemm" or "Eigen").
const char* blas_name();

// Row-major C (m x n) = op(A) (m x k) @ op(B) (k x n), for `batch` matrices apart by m*k, k*n and
// m*n elements; op(A) reads A stored k x m when a_transposed, op(B) reads B stored n x k when b_transposed.
void blas_sgemm(int batch, int m, int n, int k, const float* a, bool a_transposed, const float* b, bool b_transposed,
                float* c);

// Runs f while the BLAS library threads its calls over `threads` threads of its own (OpenBLAS);
// Eigen takes OpenMP's count, which ember already set.
void with_blas_threads(int threads, const std::function<void()>& f);

}  // namespace bench

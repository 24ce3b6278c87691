// bench/blas.h over CBLAS (OpenBLAS) or Eigen.
#include "bench/blas.h"

#include <cstddef>

#if defined(EMBER_HAVE_CBLAS)
#include <cblas.h>
#if defined(EMBER_HAVE_OPENBLAS)
extern "C" void openblas_set_num_threads(int);
#endif
#else
#include <Eigen/Core>
#endif

namespace bench {

#if defined(EMBER_HAVE_CBLAS)
const char* blas_name() { return "cblas_sgemm"; }

void blas_sgemm(int batch, int m, int n, int k, const float* a, bool a_transposed, const float* b, bool b_transposed,
                float* c) {
  for (int i = 0; i < batch; ++i) {
    const size_t ia = static_cast<size_t>(i) * m * k, ib = static_cast<size_t>(i) * k * n,
                 ic = static_cast<size_t>(i) * m * n;
    cblas_sgemm(CblasRowMajor, a_transposed ? CblasTrans : CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, m,
                n, k, 1.0f, a + ia, a_transposed ? m : k, b + ib, b_transposed ? k : n, 0.0f, c + ic, n);
  }
}
#else
const char* blas_name() { return "Eigen"; }

void blas_sgemm(int batch, int m, int n, int k, const float* a, bool a_transposed, const float* b, bool b_transposed,
                float* c) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Map = Eigen::Map<const Matrix>;
  for (int i = 0; i < batch; ++i) {
    const float* ai = a + static_cast<size_t>(i) * m * k;
    const float* bi = b + static_cast<size_t>(i) * k * n;
    Eigen::Map<Matrix> C(c + static_cast<size_t>(i) * m * n, m, n);
    if (a_transposed && b_transposed)
      C.noalias() = Map(ai, k, m).transpose() * Map(bi, n, k).transpose();
    else if (a_transposed)
      C.noalias() = Map(ai, k, m).transpose() * Map(bi, k, n);
    else if (b_transposed)
      C.noalias() = Map(ai, m, k) * Map(bi, n, k).transpose();
    else
      C.noalias() = Map(ai, m, k) * Map(bi, k, n);
  }
}
#endif

void with_blas_threads(int threads, const std::function<void()>& f) {
#if defined(EMBER_HAVE_OPENBLAS)
  openblas_set_num_threads(threads);
  f();
  openblas_set_num_threads(1);
#else
  (void)threads;
  f();
#endif
}

}  // namespace bench

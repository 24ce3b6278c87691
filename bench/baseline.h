// What the CPU benchmarks compare against: the GEMM library called directly (cblas_sgemm, or Eigen
// in a build without CBLAS), and the small timing helpers they share.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#if defined(EMBER_HAVE_CBLAS)
#include <cblas.h>
#if defined(EMBER_HAVE_OPENBLAS)
extern "C" void openblas_set_num_threads(int);
#endif
#else
#include <Eigen/Core>
#endif

namespace bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// C (m x n) = op(A) @ B (k x n), row-major; op(A) is A (m x k) or, transposed, A stored k x m.
#if defined(EMBER_HAVE_CBLAS)
inline constexpr const char* kBaselineGemm = "cblas_sgemm";
inline void baseline_gemm(int m, int n, int k, const float* a, bool a_transposed, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, a_transposed ? CblasTrans : CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a,
              a_transposed ? m : k, b, n, 0.0f, c, n);
}
#else
inline constexpr const char* kBaselineGemm = "Eigen";
inline void baseline_gemm(int m, int n, int k, const float* a, bool a_transposed, const float* b, float* c) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const Matrix> B(b, k, n);
  Eigen::Map<Matrix> C(c, m, n);
  if (a_transposed)
    C.noalias() = Eigen::Map<const Matrix>(a, k, m).transpose() * B;
  else
    C.noalias() = Eigen::Map<const Matrix>(a, m, k) * B;
}
#endif

// Calls f with the GEMM library threading its calls over `threads` threads of its own: ember keeps
// OpenBLAS on the calling thread and splits products over its OpenMP threads (cpu/gemm.cpp), so the
// baseline gets OpenBLAS's own threading back for its phase only. (Eigen takes OpenMP's count.)
template <class F>
void with_library_threads(int threads, F&& f) {
#if defined(EMBER_HAVE_OPENBLAS)
  openblas_set_num_threads(threads);
  f();
  openblas_set_num_threads(1);
#else
  (void)threads;
  f();
#endif
}

// Between the phases that time ember and the library: idle threads of either pool spin for a while
// after their last work (OpenBLAS's up to about 0.1 s), and would slow the other side's first runs.
inline void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(250)); }

}  // namespace bench

#include "cpu/gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "cpu/parallel.h"
#include "tensor/deterministic.h"
#include "tensor/error.h"
#include "tensor/ops.h"

#if defined(EMBER_HAVE_CBLAS)
#include <cblas.h>
#endif

namespace ember::cpu {

std::optional<MatrixLayout> matrix_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= cols))
    return MatrixLayout{false, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= rows))
    return MatrixLayout{true, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
  return std::nullopt;
}

namespace {

template <class T>
void eigen_gemm(int64_t m, int64_t n, int64_t k, Matrix<const T> a, Matrix<const T> b, T beta, Matrix<T> c) {
  using S = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>, std::type_identity<T>>::type;
  using RowMajor = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMajor = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  using Stride = Eigen::OuterStride<>;
  auto with_map = [](Matrix<const T> x, int64_t rows, int64_t cols, auto&& f) {
    const S* p = reinterpret_cast<const S*>(x.p);
    if (x.transposed)
      f(Eigen::Map<const ColMajor, Eigen::Unaligned, Stride>(p, rows, cols, Stride(x.ld)));
    else
      f(Eigen::Map<const RowMajor, Eigen::Unaligned, Stride>(p, rows, cols, Stride(x.ld)));
  };
  Eigen::Map<RowMajor, Eigen::Unaligned, Stride> out(reinterpret_cast<S*>(c.p), m, n, Stride(c.ld));
  with_map(a, m, k, [&](const auto& A) {
    with_map(b, k, n, [&](const auto& B) {
      if (beta == T(0))
        out.noalias() = A * B;
      else
        out.noalias() += A * B;
    });
  });
}

#if defined(EMBER_HAVE_CBLAS)
int blas_int(int64_t v) {
  if (v > INT_MAX) throw ValueError("gemm: size " + std::to_string(v) + " exceeds the BLAS library's int range");
  return static_cast<int>(v);
}
#endif

#if defined(EMBER_HAVE_OPENBLAS)
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename();
#endif

// C = A @ B + beta * C on the calling thread. OpenBLAS is told once to run every call there: ember's
// own OpenMP threads split large products (gemm below), so that one pool of threads serves both
// kernels and GEMMs. With OpenBLAS's pthreads beside OpenMP's workers on the same cores, each pool
// spun while the other worked (perf record of examples/train --model cnn on 2 cores: about 30% of
// the samples in sched_yield).
template <class T>
void gemm_here(int64_t m, int64_t n, int64_t k, Matrix<const T> a, Matrix<const T> b, T beta, Matrix<T> c) {
#if defined(EMBER_HAVE_CBLAS)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
#if defined(EMBER_HAVE_OPENBLAS)
    [[maybe_unused]] static const bool one_thread = (openblas_set_num_threads(1), true);
#endif
    const auto ta = a.transposed ? CblasTrans : CblasNoTrans, tb = b.transposed ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, ta, tb, blas_int(m), blas_int(n), blas_int(k), 1.0f, a.p, blas_int(a.ld), b.p,
                  blas_int(b.ld), beta, c.p, blas_int(c.ld));
    else
      cblas_dgemm(CblasRowMajor, ta, tb, blas_int(m), blas_int(n), blas_int(k), 1.0, a.p, blas_int(a.ld), b.p,
                  blas_int(b.ld), beta, c.p, blas_int(c.ld));
    return;
  }
#endif
  eigen_gemm<T>(m, n, k, a, b, beta, c);
}

// Rows of C go to threads in blocks of this many (columns, when C is wider than tall): 16 floats
// are a cache line, so threads never write the same line of a row-major C.
constexpr int64_t kBlock = 16;

}  // namespace

template <class T>
void gemm(int64_t m, int64_t n, int64_t k, Matrix<const T> a, Matrix<const T> b, T beta, Matrix<T> c) {
  if (c.transposed) {  // C^T (n x m) = B^T A^T
    gemm<T>(n, m, k, {b.p, !b.transposed, b.ld}, {a.p, !a.transposed, a.ld}, beta, {c.p, false, c.ld});
    return;
  }
  if (m == 0 || n == 0) return;
  if constexpr (std::is_floating_point_v<T>) {
    if (is_deterministic()) {  // OpenBLAS's and Eigen's sums depend on the CPU: see deterministic_gemm
      deterministic_gemm<T>(m, n, k, a, b, beta, c, best_gemm_isa());
      return;
    }
  }
  if (m * n * k <= kSingleThreadedGemm || cpu::max_threads() == 1) {
    gemm_here<T>(m, n, k, a, b, beta, c);
    return;
  }
  // Split the longer side of C: each thread packs the whole of the other operand again, which costs
  // least against its share of the work when that operand is the narrow one.
  const bool by_rows = m >= n;
  const int64_t len = by_rows ? m : n, other = by_rows ? n : m;
  cpu::parallel_for((len + kBlock - 1) / kBlock, kBlock * other * k, [&](int64_t begin, int64_t end) {
    const int64_t lo = begin * kBlock, count = std::min(end * kBlock, len) - lo;
    if (by_rows)  // rows [lo, lo + count) of A and C
      gemm_here<T>(count, n, k, {a.p + (a.transposed ? lo : lo * a.ld), a.transposed, a.ld}, b, beta,
                   {c.p + lo * c.ld, false, c.ld});
    else  // columns [lo, lo + count) of B and C
      gemm_here<T>(m, count, k, a, {b.p + (b.transposed ? lo * b.ld : lo), b.transposed, b.ld}, beta,
                   {c.p + lo, false, c.ld});
  });
}

#define EMBER_INSTANTIATE(T)                                                                                 \
  template void gemm<T>(int64_t, int64_t, int64_t, Matrix<const T>, Matrix<const T>, T, Matrix<T>);
EMBER_INSTANTIATE(float)
EMBER_INSTANTIATE(double)
EMBER_INSTANTIATE(int32_t)
EMBER_INSTANTIATE(int64_t)
EMBER_INSTANTIATE(uint8_t)
#undef EMBER_INSTANTIATE

}  // namespace ember::cpu

namespace ember {

std::string cpu_gemm_name() {
  if (is_deterministic()) {
    const char* isa[] = {"sse2", "avx2", "avx512"};
    return std::string("ember deterministic (") + isa[static_cast<int>(cpu::best_gemm_isa())] + ")";
  }
#if defined(EMBER_HAVE_OPENBLAS)
  return std::string("OpenBLAS (") + cpu::openblas_get_corename() + ")";
#elif defined(EMBER_HAVE_CBLAS)
  return "CBLAS";
#else
  return "Eigen";
#endif
}

}  // namespace ember

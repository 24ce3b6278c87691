#include "cpu/gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "tensor/error.h"

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

}  // namespace

template <class T>
void gemm(int64_t m, int64_t n, int64_t k, Matrix<const T> a, Matrix<const T> b, T beta, Matrix<T> c) {
  if (c.transposed) {  // C^T (n x m) = B^T A^T
    gemm<T>(n, m, k, {b.p, !b.transposed, b.ld}, {a.p, !a.transposed, a.ld}, beta, {c.p, false, c.ld});
    return;
  }
  if (m == 0 || n == 0) return;
#if defined(EMBER_HAVE_CBLAS)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
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

#define EMBER_INSTANTIATE(T)                                                                                 \
  template void gemm<T>(int64_t, int64_t, int64_t, Matrix<const T>, Matrix<const T>, T, Matrix<T>);
EMBER_INSTANTIATE(float)
EMBER_INSTANTIATE(double)
EMBER_INSTANTIATE(int32_t)
EMBER_INSTANTIATE(int64_t)
EMBER_INSTANTIATE(uint8_t)
#undef EMBER_INSTANTIATE

}  // namespace ember::cpu

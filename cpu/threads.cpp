// The one place that sets how many CPU threads ember's kernels use; GEMMs share them (the BLAS
// library itself always runs on the calling thread: cpu/gemm.cpp).
#include <string>

#include "tensor/error.h"
#include "tensor/ops.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace ember {

void set_num_threads(int n) {
  if (n < 1) throw ValueError("set_num_threads: expected a positive count, got " + std::to_string(n));
#if defined(_OPENMP)
  omp_set_num_threads(n);
#endif
}

int get_num_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace ember

// The one place that sets how many CPU threads ember's kernels use; GEMMs share them (the BLAS
// library itself always runs on the calling thread: cpu/gemm.cpp).
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "tensor/error.h"
#include "tensor/ops.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace ember {

namespace {
constexpr int kMaxThreads = 4096;

#if defined(_OPENMP)
// OpenMP takes its thread count from OMP_NUM_THREADS, and a count no machine can start crashes the
// first parallel region (a segfault inside the runtime, with no message). When the library loads, a
// count above what set_num_threads allows becomes one thread per core, and the environment is named.
[[maybe_unused]] const bool g_environment_capped = [] {
  const int requested = omp_get_max_threads();
  if (requested <= kMaxThreads) return false;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::fprintf(stderr, "ember: warning: OMP_NUM_THREADS asks for %d threads, more than the %d ember allows; using %d (one per core)\n",
               requested, kMaxThreads, cores);
  omp_set_num_threads(cores);
  return true;
}();
#endif
}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw ValueError("set_num_threads: expected a positive count, got " + std::to_string(n));
  // OpenMP aborts the process when it cannot start a thread: refuse what no machine needs.
  if (n > kMaxThreads)
    throw ValueError("set_num_threads: " + std::to_string(n) + " threads is more than the " + std::to_string(kMaxThreads) +
                     " ember allows (this machine has " + std::to_string(std::thread::hardware_concurrency()) + " cores)");
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

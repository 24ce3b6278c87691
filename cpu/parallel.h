// Splitting work across the CPU threads (OpenMP when built with it). One place decides the grain:
// small work stays on the calling thread, where a fork would cost more than it saves.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace ember::cpu {

// Elements below which one thread is faster. examples/train --model mlp (elementwise ops of 16K to
// 200K elements between GEMMs) on 2 cores ran an epoch in 1.2 s with 32768, 0.77 s with 131072 and
// 0.9-1.1 s with 262144.
inline constexpr int64_t kParallelGrain = 131072;

// The threads a parallel_for started here would use (one inside a parallel region).
inline int max_threads() {
#if defined(_OPENMP)
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

// Calls f(begin, end) on disjoint chunks covering [0, n). `cost` is elements of work per unit of n.
template <class F>
void parallel_for(int64_t n, int64_t cost, F&& f) {
#if defined(_OPENMP)
  if (n > 1 && n * cost >= kParallelGrain && !omp_in_parallel()) {
    const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n));
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
      if (begin < end) f(begin, end);
    }
    return;
  }
#endif
  (void)cost;
  if (n > 0) f(int64_t{0}, n);
}

}  // namespace ember::cpu

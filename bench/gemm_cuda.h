// bench_gemm's GPU cases: ember::matmul against cuBLASLt called directly, for every precision.
// CUDA builds only; registers nothing when no GPU is visible.
#pragma once

#include <vector>

#include "bench/gemm_case.h"

namespace bench {

void register_cuda_gemm_cases(const std::vector<GemmCase>& cases);

}  // namespace bench

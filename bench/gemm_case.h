// One GEMM case of bench_gemm: C = op(A) @ op(B), possibly batched, with the training layer it
// comes from. Its name's size part ("1024", "6272x256x2304/nt", "384x197x197x64/nn") is parsed
// back by bench/torch_compare.py, so both time the same problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/precision.h"

namespace bench {

struct GemmCase {
  int64_t batch = 1;
  int64_t m = 0, n = 0, k = 0;
  bool a_transposed = false;  // A stored k x m
  bool b_transposed = false;  // B stored n x k
  std::string source;         // "square", or the layers it serves ("vit_b16 qkv fwd, ...")

  // "1024" for a square case, else "[batch x]m x n x k/<ta><tb>" with t/n for each operand.
  std::string size_name() const;
  double flop() const { return 2.0 * static_cast<double>(batch) * m * n * k; }
};

// Every case of bench_gemm: the square sizes, then the training GEMMs of ResNet-50 and ViT-B/16
// (deduplicated, sources joined), then the batched attention products.
std::vector<GemmCase> gemm_cases(const std::vector<int64_t>& square_sizes);

// "gemm/<device>/<precision>/<size_name>".
std::string gemm_case_name(const char* device, Precision p, const GemmCase& c);

}  // namespace bench

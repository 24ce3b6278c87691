// cuBLASLt GEMMs in the CUDA backend, with a workspace per stream from ember's memory pool and the
// plan cache (descriptors and the heuristic's algorithm per problem). Host code only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace ember::cuda {

// A stored matrix as cuBLASLt reads it: column-major, rows x cols with leading dimension ld, used as
// is or transposed, the next batch's matrix batch_stride elements on (0: one matrix for all).
struct LtMatrix {
  const void* ptr = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  bool transposed = false;
  int64_t batch_stride = 0;
};

// D = op(A) op(B) (+ D when accumulate) (+ bias, added to each column), for `batch` column-major
// m x n matrices D packed one after the other (ld m). One dtype: f32 (32-bit accumulation, TF32 when
// matmul_allow_tf32()), f16 and bf16 (32-bit accumulation) or f64. bias: m elements of that dtype,
// added by CUBLASLT_EPILOGUE_BIAS, or null.
struct LtGemm {
  DType dtype = DType::f32;
  int64_t m = 0, n = 0, k = 0;
  int batch = 1;
  LtMatrix a, b;  // op(A): m x k, op(B): k x n
  void* d = nullptr;
  bool accumulate = false;
  const void* bias = nullptr;
};

// Makes the GEMM workspace of (device, stream) now: before a stream capture begins, so that the graph
// keeps ordinary pool memory rather than a graph allocation made during the capture.
void reserve_workspace(int device, cudaStream_t stream);
// Frees the workspace of (device, stream), if any, in that stream's order: called before the stream
// is destroyed, since the runtime reuses stream handles. Never raises (a failure is said on stderr).
void release_workspace(int device, cudaStream_t stream);

// Raises NotImplementedError naming `op` unless cuBLASLt takes dtype (f32, f16, bf16, f64).
void check_lt_dtype(const char* op, DType dtype);

// Queues g on the current device's current stream, with the cached plan for its problem (made on
// first use). Raises CudaError naming the failed cuBLASLt call, NotImplementedError when cuBLASLt
// has no algorithm for the problem.
void lt_matmul(const LtGemm& g);

}  // namespace ember::cuda

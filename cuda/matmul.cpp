// eval_cuda of Matmul through cuBLAS (cublasGemmStridedBatchedEx): fp32 accumulation for f32,
// f16 and bf16 (TF32 stays off unless asked for elsewhere), fp64 for f64. Row-major ember
// matrices are cuBLAS's column-major transposes, so C^T = B^T A^T is what is asked of cuBLAS.
#include <climits>
#include <optional>

#include <cublas_v2.h>

#include "autograd/grad_mode.h"
#include "cuda/error.h"
#include "cuda/host.h"
#include "tensor/ops.h"
#include "tensor/primitives/linalg.h"

namespace ember {

namespace {

// One operand as cuBLAS reads it: every batch at ptr + b * batch_stride, each matrix row-major
// (element (i, j) at i * ld + j) or, when transposed, column-major (at i + j * ld).
struct GemmOperand {
  Tensor keep;  // holds the memory (a copy when the original layout would not do)
  const void* ptr = nullptr;
  bool transposed = false;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// The layout of t (shape batch + (rows, cols)) if cuBLAS can read it as is.
std::optional<GemmOperand> as_gemm_operand(const Tensor& t, int nb, int64_t rows, int64_t cols) {
  const Shape& size = t.shape();
  const Strides& stride = t.strides();
  GemmOperand op;
  // Batch dims must flatten to one stride (0 when broadcast).
  bool first = true;
  int64_t expect = 0;
  for (int d = nb - 1; d >= 0; --d) {
    if (size[d] == 1) continue;
    if (first) {
      op.batch_stride = stride[d];
      first = false;
    } else if (stride[d] != expect) {
      return std::nullopt;
    }
    expect = stride[d] * size[d];
  }
  const int64_t sr = stride[nb], sc = stride[nb + 1];
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= cols)) {
    op.transposed = false;
    op.ld = rows == 1 ? cols : sr;
  } else if ((rows == 1 || sr == 1) && (cols == 1 || sc >= rows)) {
    op.transposed = true;
    op.ld = cols == 1 ? rows : sc;
  } else {
    return std::nullopt;
  }
  op.ptr = t.raw_data();
  op.keep = t;
  return op;
}

GemmOperand gemm_operand(const Tensor& t, const Shape& batch, int64_t rows, int64_t cols) {
  Shape full = batch;
  full.push_back(rows);
  full.push_back(cols);
  const Tensor e = expand(t, full);  // broadcast batch dims get stride 0
  if (auto op = as_gemm_operand(e, batch.size(), rows, cols)) return *op;
  return *as_gemm_operand(e.contiguous(), batch.size(), rows, cols);  // a fresh copy always fits
}

int checked_int(int64_t v, const char* what) {
  if (v > INT_MAX)
    throw NotImplementedError(std::string("matmul on CUDA: ") + what + " of " + std::to_string(v) +
                              " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

void Matmul::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor &a = in[0], &b = in[1];
  Tensor& c = out[0];
  cudaDataType_t type;
  switch (a.dtype()) {
    case DType::f32: type = CUDA_R_32F; break;
    case DType::f16: type = CUDA_R_16F; break;
    case DType::bf16: type = CUDA_R_16BF; break;
    case DType::f64: type = CUDA_R_64F; break;
    default:
      throw NotImplementedError(std::string("matmul on CUDA: dtype ") + dtype_name(a.dtype()) +
                                " is not supported (float32, float16, bfloat16 and float64 are; integer matmul "
                                "runs on the CPU)");
  }
  NoGradGuard no_grad;
  cuda::DeviceGuard guard(c.device());
  const int r = c.dim();
  const int64_t n = c.size(r - 2), m = c.size(r - 1), k = a.size(a.dim() - 1);
  Shape batch = c.shape();
  batch.resize(r - 2);
  const int64_t batches = numel(batch);
  if (c.numel() == 0) return;
  if (k == 0) {  // an empty sum: zeros
    cuda::launch_fill(c.dtype(), false, 0.0, 0, cuda::make_strided<1>(c, {}), cuda::current_stream());
    return;
  }
  const GemmOperand A = gemm_operand(a, batch, n, k);
  const GemmOperand B = gemm_operand(b, batch, k, m);
  const cublasHandle_t handle = cuda::cublas_handle();
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const double alpha64 = 1.0, beta64 = 0.0;
  const bool f64 = a.dtype() == DType::f64;
  // Column-major C^T (m x n) = B^T (m x k) * A^T (k x n).
  EMBER_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, B.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, A.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
      checked_int(m, "m"), checked_int(n, "n"), checked_int(k, "k"),
      f64 ? static_cast<const void*>(&alpha64) : static_cast<const void*>(&alpha32),
      B.ptr, type, checked_int(B.ld, "leading dimension"), B.batch_stride,
      A.ptr, type, checked_int(A.ld, "leading dimension"), A.batch_stride,
      f64 ? static_cast<const void*>(&beta64) : static_cast<const void*>(&beta32),
      c.raw_data(), type, checked_int(m, "m"), n * m, checked_int(batches, "batch count"),
      f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ember

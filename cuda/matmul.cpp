// eval_cuda of Matmul and Linear through cuBLASLt (cuda/cublaslt.h): fp32 accumulation for f32 (TF32
// only when cuda::matmul_allow_tf32()), f16 and bf16, fp64 for f64. Row-major ember matrices are
// cuBLASLt's column-major transposes, so C^T = B^T A^T is what is asked of it; Linear's bias then runs
// along the rows of C^T, where CUBLASLT_EPILOGUE_BIAS adds it.
#include <climits>
#include <optional>

#include "autograd/grad_mode.h"
#include "cuda/cublaslt.h"
#include "cuda/host.h"
#include "tensor/ops.h"
#include "tensor/primitives/linalg.h"

namespace ember {

namespace {

// One operand as cuBLASLt reads it: every batch at ptr + b * batch_stride, each matrix row-major
// (element (i, j) at i * ld + j) or, when transposed, column-major (at i + j * ld).
struct GemmOperand {
  Tensor keep;  // holds the memory (a copy when the original layout would not do)
  const void* ptr = nullptr;
  bool transposed = false;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// The layout of t (shape batch + (rows, cols)) if cuBLASLt can read it as is.
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
  // Broadcast batch dims get stride 0, which cuBLASLt reads as one matrix for every batch
  // (NVIDIA/MatX#473 relies on it).
  const Tensor e = expand(t, full);
  if (auto op = as_gemm_operand(e, batch.size(), rows, cols)) return *op;
  return *as_gemm_operand(e.contiguous(), batch.size(), rows, cols);  // a fresh copy always fits
}

// x's stored matrices as cuBLASLt reads them: a row-major rows x cols matrix is a column-major
// cols x rows one; a transposed operand is column-major rows x cols, used transposed.
cuda::LtMatrix lt_matrix(const GemmOperand& x, int64_t rows, int64_t cols) {
  return {x.ptr, x.transposed ? rows : cols, x.transposed ? cols : rows, x.ld, x.transposed, x.batch_stride};
}

// c (batch..., n, m) = a (..., n, k) @ b (..., k, m) (+ bias (m) on every row, when defined). The
// bias goes through the epilogue where PyTorch uses it too (addmm in aten/src/ATen/native/cuda/Blas.cpp
// with CUDA >= 12.1: both dims of b above 1); otherwise c starts as the bias and the GEMM adds onto it.
void gemm(const char* op, const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c) {
  cuda::check_lt_dtype(op, c.dtype());
  const int r = c.dim();
  const int64_t n = c.size(r - 2), m = c.size(r - 1), k = a.size(a.dim() - 1);
  if (c.numel() == 0) return;
  if (k == 0) {  // an empty sum: zeros, or the bias
    if (bias.defined())
      cuda::convert_into(c, bias);
    else
      cuda::launch_fill(c.dtype(), false, 0.0, 0, cuda::make_strided<1>(c, {}), cuda::current_stream());
    return;
  }
  const bool epilogue = bias.defined() && k > 1 && m > 1;
  if (bias.defined() && !epilogue) cuda::convert_into(c, bias);
  Shape batch = c.shape();
  batch.resize(r - 2);
  const int64_t batches = numel(batch);
  if (batches > INT_MAX)  // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT is an int32_t
    throw NotImplementedError(std::string(op) + " on CUDA: a batch of " + std::to_string(batches) +
                              " matrices exceeds cuBLASLt's int32 batch count");
  const GemmOperand A = gemm_operand(a, batch, n, k);
  const GemmOperand B = gemm_operand(b, batch, k, m);
  // x (batch, n, k) @ W (k, m) with W broadcast over the batch: when x's and c's matrices follow each
  // other row after row, that is one (batch·n, k) @ (k, m) GEMM, which cuBLASLt runs far better than
  // `batch` small ones over a zero batch stride.
  const bool fold = batches > 1 && B.batch_stride == 0 && !A.transposed && A.batch_stride == n * A.ld &&
                    c.is_contiguous();
  const Tensor bias_vector = epilogue ? contiguous(bias) : Tensor();
  cuda::LtGemm g;
  g.dtype = c.dtype();
  g.m = m;
  g.n = fold ? batches * n : n;
  g.k = k;
  g.batch = fold ? 1 : static_cast<int>(batches);
  g.a = lt_matrix(B, k, m);  // column-major C^T (m x n) = B^T (m x k) A^T (k x n)
  g.b = lt_matrix(A, g.n, k);
  g.d = c.raw_data();
  g.accumulate = bias.defined() && !epilogue;
  g.bias = epilogue ? bias_vector.raw_data() : nullptr;
  cuda::lt_matmul(g);
}

}  // namespace

void Matmul::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NoGradGuard no_grad;
  cuda::DeviceGuard guard(out[0].device());
  gemm(name(), in[0], in[1], Tensor(), out[0]);
}

void Linear::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NoGradGuard no_grad;  // the flattened views are the kernel's, not graph nodes
  cuda::DeviceGuard guard(out[0].device());
  const Tensor& w = in[1];
  const int64_t rows = leading_rows(in[0].shape());
  const Tensor x = reshape(in[0], {rows, w.shape()[1]});
  const Tensor y = reshape(out[0], {rows, w.shape()[0]});  // a view: out is fresh and contiguous
  gemm(name(), x, transpose(w, 0, 1), in.size() > 2 ? in[2] : Tensor(), y);  // (rows, in) @ (in, out)
}

}  // namespace ember

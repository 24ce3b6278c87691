// CPU kernels of Matmul and Linear. f32/f64 go through CBLAS (OpenBLAS) when ember was built with
// it and Eigen otherwise; integers through Eigen; f16/bf16 are widened to f32 (f32 accumulation) and
// narrowed back. Operands whose last two strides BLAS can describe are read in place; others are copied.
#include <algorithm>
#include <climits>
#include <optional>

#include "cpu/convert_into.h"
#include "cpu/gemm.h"
#include "cpu/loops.h"
#include "tensor/convert.h"
#include "tensor/ops.h"
#include "tensor/primitives/linalg.h"

namespace ember {

namespace {

// C (n x m, row-major, contiguous) = A (n x k) @ B (k x m).
template <class T>
void gemm(const T* a, cpu::MatrixLayout la, const T* b, cpu::MatrixLayout lb, T* c, int64_t n, int64_t m, int64_t k) {
  cpu::gemm<T>(n, m, k, {a, la.transposed, la.ld}, {b, lb.transposed, lb.ld}, T(0), {c, false, std::max<int64_t>(m, 1)});
}

// The (batch..., rows) dims of an operand form one run of stride ld: the batch folds into the rows.
bool batch_folds_into_rows(const Shape& batch, const Strides& batch_strides, int64_t rows, int64_t ld) {
  int64_t expected = rows * ld;
  for (int d = batch.size() - 1; d >= 0; --d) {
    if (batch[d] == 1) continue;
    if (batch_strides[d] != expected) return false;
    expected *= batch[d];
  }
  return true;
}

int64_t batch_offset(int64_t i, const Shape& batch, const Strides& strides) {
  int64_t offset = 0;
  for (int d = batch.size() - 1; d >= 0; --d) {
    offset += (i % batch[d]) * strides[d];
    i /= batch[d];
  }
  return offset;
}

// An operand's matrices as GEMM reads them: x itself when its last two strides allow, else a copy.
struct Operand {
  Tensor data;
  cpu::MatrixLayout layout;
  Strides batch_strides;  // elements, broadcast to the output's batch
};

Operand prepare(const Tensor& x, const Shape& batch) {
  const int r = x.dim();
  const int64_t rows = x.shape()[r - 2], cols = x.shape()[r - 1];
  Tensor data = x;
  std::optional<cpu::MatrixLayout> layout = cpu::matrix_layout(rows, cols, x.strides()[r - 2], x.strides()[r - 1]);
  if (!layout) {
    NoGradGuard no_grad;
    data = contiguous(x);
    layout = cpu::MatrixLayout{false, std::max<int64_t>(cols, 1)};
  }
  Shape own_batch = x.shape();
  own_batch.resize(r - 2);
  Strides own_strides = data.strides();
  own_strides.resize(r - 2);
  return {data, *layout, broadcast_strides(own_batch, own_strides, batch)};
}

template <class T>
void matmul_elements(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int r = out.dim();
  const int64_t n = out.shape()[r - 2], m = out.shape()[r - 1], k = a.shape().back();
  if (out.numel() == 0) return;
  T* c = out.data<T>();
  if (k == 0) {
    std::fill(c, c + out.numel(), T(0));
    return;
  }
  Shape batch = out.shape();
  batch.resize(r - 2);
  const Operand A = prepare(a, batch), B = prepare(b, batch);
  const T *a0 = A.data.data<T>(), *b0 = B.data.data<T>();
  const int64_t count = numel(batch);

  const bool b_shared = std::all_of(B.batch_strides.begin(), B.batch_strides.end(), [](int64_t s) { return s == 0; });
  if (count > 1 && b_shared && !A.layout.transposed && batch_folds_into_rows(batch, A.batch_strides, n, A.layout.ld)) {
    gemm(a0, A.layout, b0, B.layout, c, count * n, m, k);  // (batch * n, k) @ (k, m)
    return;
  }
  auto one = [&](int64_t i) {
    gemm(a0 + batch_offset(i, batch, A.batch_strides), A.layout, b0 + batch_offset(i, batch, B.batch_strides),
         B.layout, c + i * n * m, n, m, k);
  };
  if (n * m * k <= cpu::kSingleThreadedGemm) {
    cpu::parallel_for(count, n * m * k, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) one(i);
    });
  } else {
    for (int64_t i = 0; i < count; ++i) one(i);  // cpu::gemm threads each one
  }
}

// y (rows, out) = x (rows, in) @ w^T (+ bias): the bias is written into y first and the GEMM adds
// onto it (beta = 1), so it costs no pass of its own.
template <class T>
void linear_elements(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const int64_t rows = y.shape()[0], out = y.shape()[1], k = x.shape()[1];
  if (y.numel() == 0) return;
  T* c = y.data<T>();
  if (bias.defined())
    cpu::map_elements<T, T, 1>(y, {&bias}, [](T v) { return v; });
  else if (k == 0)
    std::fill(c, c + y.numel(), T(0));
  if (k == 0) return;
  const Operand X = prepare(x, {}), W = prepare(transpose(w, 0, 1), {});  // W: (in, out)
  cpu::gemm<T>(rows, out, k, {X.data.data<T>(), X.layout.transposed, X.layout.ld},
               {W.data.data<T>(), W.layout.transposed, W.layout.ld}, bias.defined() ? T(1) : T(0), {c, false, out});
}

}  // namespace

void Matmul::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  visit(out[0].dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("matmul: not supported for bool tensors");
    } else if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      NoGradGuard no_grad;  // the widened copies are the kernel's temporaries, not graph nodes
      const Tensor a32 = to(in[0], DType::f32), b32 = to(in[1], DType::f32);
      const Tensor c32 = Tensor::empty(out[0].shape(), DType::f32);
      matmul_elements<float>(a32, b32, c32);
      cpu::convert_into(out[0], c32);
    } else {
      matmul_elements<T>(in[0], in[1], out[0]);
    }
  });
}

void Linear::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NoGradGuard no_grad;  // the flattened views and widened copies are the kernel's, not graph nodes
  const Tensor& w = in[1];
  const Tensor bias = in.size() > 2 ? in[2] : Tensor();
  const int64_t rows = leading_rows(in[0].shape());
  const Tensor x = reshape(in[0], {rows, w.shape()[1]});
  const Tensor y = reshape(out[0], {rows, w.shape()[0]});  // a view: out is fresh and contiguous
  visit(y.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("linear: not supported for bool tensors");
    } else if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      // f32 GEMM, then one narrowing pass that adds the bias on the way.
      const Tensor y32 = Tensor::empty(y.shape(), DType::f32);
      linear_elements<float>(to(x, DType::f32), to(w, DType::f32), Tensor(), y32);
      if (bias.defined()) {
        const Tensor b32 = to(bias, DType::f32);
        cpu::map_elements<T, float, 2>(y, {&y32, &b32}, [](float v, float b) { return convert<T>(v + b); });
      } else {
        cpu::convert_into(y, y32);
      }
    } else {
      linear_elements<T>(x, w, bias, y);
    }
  });
}

}  // namespace ember

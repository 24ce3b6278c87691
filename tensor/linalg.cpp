// Front ends, shape checks and the vjps of matrix multiplication (matmul, mm, bmm) and linear.
#include "tensor/autocast.h"
#include "tensor/ops.h"
#include "tensor/primitives/linalg.h"

namespace ember {

namespace {

std::string operands(const Tensor& a, const Tensor& b) { return to_string(a.shape()) + " @ " + to_string(b.shape()); }

// The contracted sizes: a's last dim against b's second-to-last (its only one when 1-D).
void check_inner_dims(const char* op, const Tensor& a, const Tensor& b) {
  const int64_t ka = a.shape().back(), kb = b.dim() == 1 ? b.shape()[0] : b.shape()[b.dim() - 2];
  if (ka != kb)
    throw ShapeError(std::string(op) + ": " + operands(a, b) + ": inner dims disagree (" + std::to_string(ka) +
                     " vs " + std::to_string(kb) + ")");
}

// Mixed inputs compute in their promoted dtype; integers are allowed, bool is not (as in PyTorch).
DType matmul_dtype(const char* op, const Tensor& a, const Tensor& b) {
  const DType dt = result_type(a, b);
  if (dt == DType::boolean) throw DTypeError(std::string(op) + ": not supported for bool tensors; convert with to() first");
  return dt;
}

Shape batch_dims(const Shape& s) {
  Shape out = s;
  out.resize(s.size() - 2);
  return out;
}

Tensor run_matmul(const char* op, const Tensor& a, const Tensor& b) {
  const DType dt = matmul_dtype(op, a, b);
  return run1(Matmul{}, {a.to(dt), b.to(dt)});
}

}  // namespace

int64_t leading_rows(const Shape& s) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < s.size(); ++d) rows *= s[d];
  return rows;
}

std::vector<OutputSpec> Matmul::infer(const std::vector<Tensor>& in) const {
  const Tensor &a = in[0], &b = in[1];
  if (a.dim() < 2 || b.dim() < 2)
    throw ShapeError("matmul: the primitive takes operands of at least 2 dims, got " + operands(a, b));
  if (a.dtype() != b.dtype())
    throw DTypeError(std::string("matmul: operands are ") + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) +
                     "; the primitive takes one dtype");
  check_inner_dims(name(), a, b);
  const Shape ba = batch_dims(a.shape()), bb = batch_dims(b.shape());
  const int rank = std::max(ba.size(), bb.size());
  for (int i = 0; i < rank; ++i) {
    const int ia = ba.size() - rank + i, ib = bb.size() - rank + i;
    const int64_t sa = ia >= 0 ? ba[ia] : 1, sb = ib >= 0 ? bb[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      throw ShapeError("matmul: " + operands(a, b) + ": batch dims " + to_string(ba) + " and " + to_string(bb) +
                       " do not broadcast");
  }
  Shape out = broadcast_shapes(ba, bb, name());
  out.push_back(a.shape()[a.dim() - 2]);
  out.push_back(b.shape().back());
  return {{out, a.dtype()}};
}

std::vector<Tensor> Matmul::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                const std::vector<Tensor>&) {
  const Tensor &a = in[0], &b = in[1], &gy = g[0];  // a (..., n, k), b (..., k, m), gy (..., n, m)
  const Shape &a_shape = input_meta(0).shape, &b_shape = input_meta(1).shape;
  Tensor ga, gb;
  if (input_needs_grad(0)) ga = sum_to(matmul(gy, transpose(b, -1, -2)), a_shape);  // (..., n, m) @ (..., m, k)
  if (input_needs_grad(1)) {
    if (b.dim() == 2 && a.dim() > 2) {
      // b was shared by the whole batch: fold the batch into the rows, one GEMM and no (..., k, m) temporary.
      const int64_t k = a_shape.back(), m = b_shape.back();
      const int64_t rows = leading_rows(a_shape);
      gb = matmul(transpose(reshape(a, {rows, k}), 0, 1), reshape(gy, {rows, m}));  // (k, rows) @ (rows, m)
    } else {
      gb = sum_to(matmul(transpose(a, -1, -2), gy), b_shape);  // (..., k, n) @ (..., n, m)
    }
  }
  return {ga, gb};
}

std::vector<OutputSpec> Linear::infer(const std::vector<Tensor>& in) const {
  const Tensor &x = in[0], &w = in[1];
  const bool bias = in.size() > 2;
  const std::string args = "input " + to_string(x.shape()) + ", weight " + to_string(w.shape()) +
                           (bias ? ", bias " + to_string(in[2].shape()) : std::string());
  if (w.dim() != 2)
    throw ShapeError("linear: " + args + ": the weight must be 2-D (out_features, in_features) or 1-D (in_features)");
  if (x.dim() == 0 || x.shape().back() != w.shape()[1])
    throw ShapeError("linear: " + args + ": the input's last dim must equal in_features=" + std::to_string(w.shape()[1]));
  if (bias && (in[2].dim() != 1 || in[2].shape()[0] != w.shape()[0]))
    throw ShapeError("linear: " + args + ": the bias must be 1-D of out_features=" + std::to_string(w.shape()[0]));
  for (const Tensor& t : in)
    if (t.dtype() != x.dtype())
      throw DTypeError(std::string("linear: operands are ") + dtype_name(x.dtype()) + " and " + dtype_name(t.dtype()) +
                       "; the primitive takes one dtype");
  Shape out = x.shape();
  out[out.size() - 1] = w.shape()[0];
  return {{out, x.dtype()}};
}

std::vector<Tensor> Linear::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                const std::vector<Tensor>&) {
  const Tensor &x = in[0], &w = in[1], &gy = g[0];  // x (..., in), w (out, in), gy (..., out)
  const int64_t in_features = w.shape()[1], out_features = w.shape()[0];
  const int64_t rows = leading_rows(input_meta(0).shape);
  const Tensor gy2 = reshape(gy, {rows, out_features});
  Tensor gx, gw, gb;
  if (input_needs_grad(0)) gx = matmul(gy, w);  // (..., out) @ (out, in)
  if (input_needs_grad(1)) gw = matmul(transpose(gy2, 0, 1), reshape(x, {rows, in_features}));  // (out, rows) @ (rows, in)
  if (in.size() > 2 && input_needs_grad(2)) gb = sum(gy2, {0});  // (out)
  std::vector<Tensor> grads{gx, gw};
  if (in.size() > 2) grads.push_back(gb);
  return grads;
}

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  if (w_in.dim() == 1) {  // one output feature, dropped: x @ w (+ a 0-dim bias), as PyTorch's linear
    if (b_in.defined() && b_in.dim() != 0)
      throw ShapeError("linear: a 1-D weight " + to_string(w_in.shape()) + " takes a 0-dim bias, got shape " +
                       to_string(b_in.shape()));
    const Tensor y = matmul(x_in, w_in);
    return b_in.defined() ? y + b_in : y;
  }
  const auto [x, w, b] = amp::autocast_args("linear", x_in, w_in, b_in);
  // Mixed dtypes compute in the promoted one, as matmul(x, w.t()) + b would.
  const DType dt = b.defined() ? promote_types(matmul_dtype("linear", x, w), b.dtype()) : matmul_dtype("linear", x, w);
  std::vector<Tensor> in{x.to(dt), w.to(dt)};
  if (b.defined()) in.push_back(b.to(dt));
  return run1(Linear{}, in);
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("matmul", a_in, b_in);
  if (a.dim() == 0 || b.dim() == 0)
    throw ShapeError("matmul: both arguments need at least 1 dim, got " + operands(a, b));
  check_inner_dims("matmul", a, b);
  // A 1-D a is a row (1, k), a 1-D b a column (k, 1); the added dims go again afterwards.
  Tensor out = run_matmul("matmul", a.dim() == 1 ? unsqueeze(a, 0) : a, b.dim() == 1 ? unsqueeze(b, -1) : b);
  if (b.dim() == 1) out = squeeze(out, -1);
  if (a.dim() == 1) out = squeeze(out, b.dim() == 1 ? -1 : -2);
  return out;
}

Tensor mm(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("mm", a_in, b_in);
  if (a.dim() != 2 || b.dim() != 2) throw ShapeError("mm: expects 2-D tensors, got " + operands(a, b));
  check_inner_dims("mm", a, b);
  return run_matmul("mm", a, b);
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = amp::autocast_args("bmm", a_in, b_in);
  if (a.dim() != 3 || b.dim() != 3) throw ShapeError("bmm: expects 3-D tensors, got " + operands(a, b));
  if (a.shape()[0] != b.shape()[0])
    throw ShapeError("bmm: " + operands(a, b) + ": batch sizes disagree (" + std::to_string(a.shape()[0]) + " vs " +
                     std::to_string(b.shape()[0]) + ")");
  check_inner_dims("bmm", a, b);
  return run_matmul("bmm", a, b);
}

}  // namespace ember

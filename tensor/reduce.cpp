// Front ends and vjps of the reductions, and the statistics composed from them.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/autocast.h"
#include "tensor/ops.h"
#include "tensor/primitives/reduce.h"

namespace ember {

namespace {
// Wraps, sorts and de-duplicates dims; empty stays empty (= all dims).
Shape normalize_dims(const Shape& dims, int ndim, const char* op) {
  Shape out;
  for (int64_t d : dims) out.push_back(ndim == 0 ? wrap_dim(d, 0, op) : wrap_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  Shape unique;
  for (int i = 0; i < out.size(); ++i) {
    if (i > 0 && out[i] == out[i - 1]) throw ShapeError(std::string(op) + ": dim " + std::to_string(out[i]) + " appears twice");
    unique.push_back(out[i]);
  }
  if (ndim == 0) return {};
  return unique;
}

bool is_reduced(const Shape& dims, int d) { return dims.empty() || std::find(dims.begin(), dims.end(), d) != dims.end(); }

// How many elements each output of reducing `dims` of `shape` folds.
int64_t reduced_count(const Shape& shape, const Shape& dims) {
  int64_t count = 1;
  for (int i = 0; i < shape.size(); ++i)
    if (is_reduced(dims, i)) count *= shape[i];
  return count;
}

// amax, argmax and friends have no identity: an empty slice has no answer (IndexError, as PyTorch).
void check_nonempty_slices(const char* op, const Shape& shape, const Shape& dims) {
  for (int i = 0; i < shape.size(); ++i)
    if (is_reduced(dims, i) && shape[i] == 0)
      throw IndexError(std::string(op) + ": cannot reduce dim " + std::to_string(i) + " of size 0 (input shape " +
                       to_string(shape) + "): the operation has no identity");
}

void require_floating(const char* op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    throw DTypeError(std::string(op) + ": expected a floating input, got " + dtype_name(x.dtype()) +
                     "; convert with to() first");
}

DType sum_dtype(DType d) { return is_floating(d) ? d : DType::i64; }

// The wider float a sum or product with `dtype` given folds x's values into directly (f16 into
// f32); none when x must be converted first.
std::optional<DType> widened(DType x, std::optional<DType> dtype) {
  if (dtype && *dtype != x && is_floating(x) && is_floating(*dtype) && promote_types(x, *dtype) == *dtype) return dtype;
  return std::nullopt;
}

// 16-bit floats widened to f32, so squares and powers neither overflow nor lose digits.
Tensor widen_half(const Tensor& x) { return x.to(opmath_dtype(x.dtype())); }

// s^(1/p) whose gradient at s == 0 (infinite there) is taken as 0, as PyTorch's norm and std do.
Tensor root_with_zero_grad(const Tensor& s, double p) {
  const Tensor zero = eq(s, 0);
  const Tensor safe = masked_fill(s, zero, 1);
  return masked_fill(p == 2 ? sqrt(safe) : pow(safe, 1.0 / p), zero, 0);
}

// The gradient of a reduction, reshaped so that it broadcasts against the input.
Tensor expand_reduced(const Tensor& g, const Shape& input_shape, const Shape& dims, bool keepdim) {
  return keepdim ? g : reshape(g, reduced_shape(input_shape, dims, true));
}
}  // namespace

Shape reduced_shape(const Shape& shape, const Shape& dims, bool keepdim) {
  Shape out;
  for (int i = 0; i < shape.size(); ++i) {
    if (!is_reduced(dims, i)) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// ---- primitives: shapes and vjps

std::vector<OutputSpec> Sum::infer(const std::vector<Tensor>& in) const {
  return {{reduced_shape(in[0].shape(), dims_, keepdim_), dtype_.value_or(sum_dtype(in[0].dtype()))}};
}

// The cotangent takes the input's dtype before it is expanded: one small conversion.
std::vector<Tensor> Sum::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&, const std::vector<Tensor>&) {
  const autograd::TensorMeta& x = input_meta(0);
  return {expand(expand_reduced(g[0].to(x.dtype), x.shape, dims_, keepdim_), x.shape)};
}

std::vector<OutputSpec> Prod::infer(const std::vector<Tensor>& in) const {
  return {{reduced_shape(in[0].shape(), dims_, keepdim_), dtype_.value_or(sum_dtype(in[0].dtype()))}};
}

// d prod / d x_i is the product of the other elements of its slice: y / x_i away from zeros; at a
// zero it is the product of the nonzero others if that zero is the slice's only one, else 0.
// 16-bit inputs work in f32 with the product taken again there: the saved output was rounded to
// 16 bits, and may have overflowed where y / x_i does not.
std::vector<Tensor> Prod::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                              const std::vector<Tensor>& out) {
  const DType ct = opmath_dtype(in[0].dtype());
  const Tensor x = in[0].to(ct);
  const Tensor grad = expand_reduced(g[0].to(ct), x.shape(), dims_, keepdim_);
  const Tensor y = out[0].dtype() == ct ? expand_reduced(out[0], x.shape(), dims_, keepdim_)
                                        : prod(in[0], dims_, /*keepdim=*/true, ct);
  const Tensor is_zero = eq(x, 0);
  const Tensor nonzero_or_one = masked_fill(x, is_zero, 1);
  const Tensor zeros_in_slice = sum(is_zero, dims_, /*keepdim=*/true);
  const Tensor others_of_zero = masked_fill(prod(nonzero_or_one, dims_, /*keepdim=*/true), ne(zeros_in_slice, 1), 0);
  return {grad * where(is_zero, others_of_zero, y / nonzero_or_one)};
}

std::vector<OutputSpec> Extremum::infer(const std::vector<Tensor>& in) const {
  check_nonempty_slices(name(), in[0].shape(), dims_);
  return {{reduced_shape(in[0].shape(), dims_, keepdim_), in[0].dtype()}};
}

// Ties share the gradient evenly (a NaN extreme matches nothing and gives NaN, as in PyTorch). The
// share is taken in f32 for 16-bit inputs: a count of ties past 65504 is inf in f16.
std::vector<Tensor> Extremum::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                  const std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const Tensor grad = expand_reduced(g[0].to(opmath_dtype(g[0].dtype())), x.shape(), dims_, keepdim_);
  const Tensor is_extreme = eq(x, expand_reduced(out[0], x.shape(), dims_, keepdim_));
  const Tensor ties = sum(is_extreme, dims_, /*keepdim=*/true);
  return {div(grad, ties) * is_extreme.to(grad.dtype())};
}

std::vector<OutputSpec> ArgExtremum::infer(const std::vector<Tensor>& in) const {
  const Shape dims = in[0].dim() == 0 ? Shape{} : Shape{dim_};
  check_nonempty_slices(name(), in[0].shape(), dims);
  return {{reduced_shape(in[0].shape(), dims, keepdim_), DType::i64}};
}

// ---- front ends

Tensor sum(const Tensor& x_in, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  const auto [x] = amp::autocast_args("sum", dtype, x_in);
  const Shape nd = normalize_dims(dims, x.dim(), "sum");
  if (const auto wide = widened(x.dtype(), dtype)) return run1(Sum(nd, keepdim, wide), {x});
  const Tensor total = run1(Sum(nd, keepdim), {dtype ? x.to(*dtype) : x});
  // Integers sum in int64; a dtype asked for (uint8, bool) is the result's, as in PyTorch.
  return dtype && total.dtype() != *dtype ? total.to(*dtype) : total;
}

// 16-bit inputs are summed into f32 and divided there, then rounded once (PyTorch's rule: the mean
// of 70000 f16 ones is 1, though their sum is inf in f16).
Tensor mean(const Tensor& x_in, const Shape& dims, bool keepdim) {
  const auto [x] = amp::autocast_args("mean", x_in);
  require_floating("mean", x);
  const Shape nd = normalize_dims(dims, x.dim(), "mean");
  const Tensor total = sum(x, nd, keepdim, opmath_dtype(x.dtype()));
  return div(total, static_cast<double>(reduced_count(x.shape(), nd))).to(x.dtype());
}

Tensor prod(const Tensor& x_in, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  const auto [x] = amp::autocast_args("prod", dtype, x_in);
  const Shape nd = normalize_dims(dims, x.dim(), "prod");
  if (const auto wide = widened(x.dtype(), dtype)) return run1(Prod(nd, keepdim, wide), {x});
  return run1(Prod(nd, keepdim), {dtype ? x.to(*dtype) : x});
}

Tensor amax(const Tensor& x_in, const Shape& dims, bool keepdim) {
  const auto [x] = amp::autocast_args("amax", x_in);
  return run1(Extremum(normalize_dims(dims, x.dim(), "amax"), keepdim, /*is_max=*/true), {x});
}

Tensor amin(const Tensor& x_in, const Shape& dims, bool keepdim) {
  const auto [x] = amp::autocast_args("amin", x_in);
  return run1(Extremum(normalize_dims(dims, x.dim(), "amin"), keepdim, /*is_max=*/false), {x});
}

namespace {
// Values come from gathering at the indices, so the gradient reaches only the chosen element.
ValuesIndices extreme_along(const Tensor& x_in, int64_t dim, bool keepdim, bool is_max) {
  const char* op = is_max ? "max" : "min";
  const auto [x] = amp::autocast_args(op, x_in);
  const Tensor x1 = x.dim() == 0 ? reshape(x, {1}) : x;
  const int d = wrap_dim(dim, x.dim(), op);
  check_nonempty_slices(op, x1.shape(), {d});
  const Tensor indices = run1(ArgExtremum(d, /*keepdim=*/true, is_max), {x1});
  const Tensor values = gather(x1, d, indices);
  if (x.dim() == 0) return {reshape(values, {}), reshape(indices, {})};
  if (keepdim) return {values, indices};
  return {squeeze(values, d), squeeze(indices, d)};
}

Tensor arg_extreme(const Tensor& x_in, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  const char* op = is_max ? "argmax" : "argmin";
  const auto [x] = amp::autocast_args(op, x_in);
  if (dim) return run1(ArgExtremum(wrap_dim(*dim, x.dim(), op), keepdim, is_max), {x});
  // No dim: the index into the flattened tensor.
  check_nonempty_slices(op, x.shape(), {});
  const Tensor index = run1(ArgExtremum(0, /*keepdim=*/false, is_max), {reshape(x, {-1})});
  return keepdim ? reshape(index, Shape::filled(x.dim(), 1)) : index;
}
}  // namespace

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return extreme_along(x, dim, keepdim, true); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return extreme_along(x, dim, keepdim, false); }
Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return arg_extreme(x, dim, keepdim, true); }
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return arg_extreme(x, dim, keepdim, false); }

Tensor var(const Tensor& x_in, const Shape& dims, double correction, bool keepdim) {
  const auto [x] = amp::autocast_args("var", x_in);
  require_floating("var", x);
  const Shape nd = normalize_dims(dims, x.dim(), "var");
  const Tensor xw = widen_half(x);
  const Tensor centered = xw - mean(xw, nd, /*keepdim=*/true);
  const double divisor = std::max(static_cast<double>(reduced_count(x.shape(), nd)) - correction, 0.0);
  return div(sum(square(centered), nd, keepdim), divisor).to(x.dtype());
}

Tensor std(const Tensor& x_in, const Shape& dims, double correction, bool keepdim) {
  const auto [x] = amp::autocast_args("std", x_in);
  require_floating("std", x);
  return root_with_zero_grad(var(widen_half(x), dims, correction, keepdim), 2).to(x.dtype());
}

Tensor logsumexp(const Tensor& x_in, const Shape& dims, bool keepdim) {
  const auto [x] = amp::autocast_args("logsumexp", x_in);
  const DType dtype = is_floating(x.dtype()) ? x.dtype() : kDefaultFloat;
  const Tensor xw = widen_half(x.to(dtype));
  const Shape nd = normalize_dims(dims, x.dim(), "logsumexp");
  if (x.numel() == 0) return log(sum(exp(xw), nd, keepdim)).to(dtype);  // log(0) = -inf, as PyTorch
  // Shifting by the max keeps exp from overflowing; an infinite max is replaced by 0 so that a
  // slice of -inf gives -inf (not -inf - -inf = NaN) and one holding +inf gives +inf.
  Tensor shift;
  {
    NoGradGuard no_grad;
    const Tensor m = amax(xw, nd, /*keepdim=*/true);
    shift = masked_fill(m, eq(abs(m), std::numeric_limits<double>::infinity()), 0);
  }
  const Tensor out = log(sum(exp(xw - shift), nd, /*keepdim=*/true)) + shift;
  return (keepdim ? out : reshape(out, reduced_shape(x.shape(), nd, false))).to(dtype);
}

Tensor norm(const Tensor& x_in, double p, const Shape& dims, bool keepdim) {
  const auto [x] = amp::autocast_args("norm", x_in);
  require_floating("norm", x);
  const Shape nd = normalize_dims(dims, x.dim(), "norm");
  const Tensor xw = widen_half(x);
  constexpr double inf = std::numeric_limits<double>::infinity();
  Tensor out;
  if (p == inf) out = amax(abs(xw), nd, keepdim);
  else if (p == -inf) out = amin(abs(xw), nd, keepdim);
  else if (p == 0) out = sum(ne(xw, 0).to(xw.dtype()), nd, keepdim);  // the count of nonzeros
  else if (p == 1) out = sum(abs(xw), nd, keepdim);
  else if (p == 2) out = root_with_zero_grad(sum(square(xw), nd, keepdim), 2);
  else out = root_with_zero_grad(sum(pow(abs(xw), p), nd, keepdim), p);
  return out.to(x.dtype());
}

}  // namespace ember

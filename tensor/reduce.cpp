// Front ends and vjps of the reductions, and the statistics composed from them.
#include <algorithm>

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

DType sum_dtype(DType d) { return is_floating(d) ? d : DType::i64; }

// The gradient of a reduction, reshaped so that it broadcasts against the input.
Tensor expand_reduced(const Tensor& g, const Shape& input_shape, const Shape& dims, bool keepdim) {
  return keepdim ? g : reshape(g, reduced_shape(input_shape, dims, true));
}
}  // namespace

Shape reduced_shape(const Shape& shape, const Shape& dims, bool keepdim) {
  Shape out;
  for (int i = 0; i < shape.size(); ++i) {
    const bool reduced = dims.empty() || std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

std::vector<OutputSpec> Sum::infer(const std::vector<Tensor>& in) const {
  return {{reduced_shape(in[0].shape(), dims_, keepdim_), sum_dtype(in[0].dtype())}};
}

std::vector<Tensor> Sum::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&, const std::vector<Tensor>&) {
  const Shape& shape = input_meta(0).shape;
  return {expand(expand_reduced(g[0], shape, dims_, keepdim_), shape)};
}

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  return run1(Sum(normalize_dims(dims, x.dim(), "sum"), keepdim), {x});
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  if (!is_floating(x.dtype()))
    throw DTypeError(std::string("mean: expected a floating input, got ") + dtype_name(x.dtype()) +
                     "; convert with to() first");
  const Shape nd = normalize_dims(dims, x.dim(), "mean");
  const int64_t count = x.numel() / std::max<int64_t>(numel(reduced_shape(x.shape(), nd, false)), 1);
  return div(sum(x, nd, keepdim), static_cast<double>(count));
}

}  // namespace ember

#include "optim/clip_grad.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "optim/amp/primitives.h"
#include "optim/primitives/total_norm.h"
#include "tensor/capture.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace ember {

std::vector<OutputSpec> TotalNorm::infer(const std::vector<Tensor>& in) const {
  DType dtype = DType::f32;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_floating(in[i].dtype()))
      throw DTypeError(std::string(name()) + ": tensor " + std::to_string(i) + " is " + dtype_name(in[i].dtype()) +
                       ", expected a floating dtype");
    if (in[i].dtype() == DType::f64) dtype = DType::f64;
  }
  return {{Shape{}, dtype}};
}

namespace optim {

namespace {
std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const auto& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  return grads;
}
}  // namespace

// PyTorch torch/nn/utils/clip_grad.py: total = norm of the per-gradient norms, which is the norm of
// all elements together.
Tensor total_grad_norm(const std::vector<Tensor>& params, double norm_type) {
  if (!(norm_type > 0))
    throw ValueError("total_grad_norm: norm_type must be > 0 (or infinity), got " + std::to_string(norm_type));
  NoGradGuard no_grad;
  std::vector<Tensor> grads = grads_of(params);
  if (grads.empty()) {
    Device device = kCPU;
    for (const auto& p : params)
      if (p.defined()) device = p.device();
    return zeros({}, TensorOptions(DType::f32).with_device(device));
  }
  for (auto& g : grads) g = g.contiguous();
  return run1(TotalNorm(norm_type), grads);
}

// clip_coef = max_norm / (total + 1e-6), clamped to 1; g *= clip_coef (PyTorch's clip_grad_norm_),
// with the coefficient 1 when total is not finite.
Tensor is_finite(const Tensor& x) { return eq(sub(x, x), 0.0); }  // inf - inf and NaN - NaN are NaN

namespace {
// x's distinct elements as one contiguous 1-D tensor: an alias of x's storage when, broadcast
// (stride 0) dims dropped, its elements fill a block of memory in some order; a copy otherwise.
Tensor flat_elements(const Tensor& x) {
  Shape shape;
  Strides strides;
  std::vector<std::pair<int64_t, int64_t>> by_stride;
  for (int d = 0; d < x.dim(); ++d)
    if (x.strides()[d] != 0 && x.shape()[d] != 1) {
      shape.push_back(x.shape()[d]);
      strides.push_back(x.strides()[d]);
      by_stride.emplace_back(x.strides()[d], x.shape()[d]);
    }
  const Tensor distinct(make_intrusive<TensorImpl>(x.storage(), x.offset(), shape, strides, x.dtype()));
  std::sort(by_stride.begin(), by_stride.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : by_stride) {
    if (stride != expected) return reshape(distinct.contiguous(), {-1});
    expected *= size;
  }
  return Tensor(make_intrusive<TensorImpl>(x.storage(), x.offset(), Shape{expected}, Strides{1}, x.dtype()));
}
}  // namespace

void mark_first_nonfinite(const Tensor& first, int32_t slot, const std::vector<Tensor>& tensors) {
  if (!first.defined() || first.dtype() != DType::i32 || first.dim() != 0)
    throw DTypeError("mark_first_nonfinite: `first` must be a 0-dim int32 tensor");
  NoGradGuard no_grad;
  std::vector<Tensor> flat;
  for (const Tensor& t : tensors)
    if (t.defined() && t.is_floating_point() && t.numel() > 0) flat.push_back(flat_elements(t));
  if (flat.empty()) return;
  FirstNonFinite check(slot);
  std::vector<Tensor> out = {first};
  run_update(check, flat, out);
}

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  const Tensor total = total_grad_norm(params, norm_type);
  if (error_if_nonfinite) capture::refuse("clip_grad_norm_ with error_if_nonfinite reads the norm on the host");
  if (error_if_nonfinite && !all_finite(total))
    throw ValueError("clip_grad_norm_: the total norm of order " + std::to_string(norm_type) + " of " +
                     std::to_string(grads_of(params).size()) + " gradients is " +
                     std::to_string(total.item<double>()) + " (pass error_if_nonfinite = false to return it instead)");
  clip_grads_to_norm_(params, total, max_norm);
  return total;
}

void clip_grads_to_norm_(const std::vector<Tensor>& params, const Tensor& total, double max_norm) {
  std::vector<Tensor> grads = grads_of(params);
  if (grads.empty()) return;
  NoGradGuard no_grad;
  const Tensor coef = where(is_finite(total), minimum(max_norm / add(total, 1e-6), 1.0), ones_like(total));
  for (auto& g : grads) mul_(g, coef);
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  if (!(clip_value >= 0)) throw ValueError("clip_grad_value_: clip_value must be >= 0, got " + std::to_string(clip_value));
  NoGradGuard no_grad;
  for (auto g : grads_of(params)) clamp_(g, -clip_value, clip_value);
}

}  // namespace optim
}  // namespace ember

#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "optim/primitives/total_norm.h"
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

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  const Tensor total = total_grad_norm(params, norm_type);
  if (error_if_nonfinite && !all_finite(total))
    throw ValueError("clip_grad_norm_: the total norm of order " + std::to_string(norm_type) + " of " +
                     std::to_string(grads_of(params).size()) + " gradients is " +
                     std::to_string(total.item<double>()) + " (pass error_if_nonfinite = false to return it instead)");
  std::vector<Tensor> grads = grads_of(params);
  if (grads.empty()) return total;
  NoGradGuard no_grad;
  const Tensor coef = where(is_finite(total), minimum(max_norm / add(total, 1e-6), 1.0), ones_like(total));
  for (auto& g : grads) mul_(g, coef);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  if (!(clip_value >= 0)) throw ValueError("clip_grad_value_: clip_value must be >= 0, got " + std::to_string(clip_value));
  NoGradGuard no_grad;
  for (auto g : grads_of(params)) clamp_(g, -clip_value, clip_value);
}

}  // namespace optim
}  // namespace ember

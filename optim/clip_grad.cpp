#include "optim/clip_grad.h"

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace ember::optim {

namespace {
std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const auto& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  return grads;
}
}  // namespace

// PyTorch torch/nn/utils/clip_grad.py: total = norm of the per-gradient norms.
double grad_norm(const std::vector<Tensor>& params, double norm_type) {
  if (!(norm_type > 0))
    throw ValueError("grad_norm: norm_type must be > 0 (or infinity), got " + std::to_string(norm_type));
  NoGradGuard no_grad;
  double total = 0;
  const bool inf_norm = std::isinf(norm_type);
  for (const auto& g : grads_of(params)) {
    const double n = norm(g, norm_type).item<double>();
    if (inf_norm) total = std::isnan(n) || std::isnan(total) ? std::numeric_limits<double>::quiet_NaN() : std::max(total, n);
    else total += norm_type == 2.0 ? n * n : std::pow(n, norm_type);
  }
  if (!inf_norm) total = norm_type == 2.0 ? std::sqrt(total) : std::pow(total, 1.0 / norm_type);
  return total;
}

// clip_coef = max_norm / (total + 1e-6), clamped to 1; g *= clip_coef (PyTorch's clip_grad_norm_).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  const double total = grad_norm(params, norm_type);
  if (!std::isfinite(total)) {
    if (error_if_nonfinite)
      throw ValueError("clip_grad_norm_: the total norm of order " + std::to_string(norm_type) + " of " +
                       std::to_string(grads_of(params).size()) + " gradients is " + std::to_string(total) +
                       " (pass error_if_nonfinite = false to return it instead)");
    return total;
  }
  const double clip_coef = max_norm / (total + 1e-6);
  if (clip_coef < 1.0) {
    NoGradGuard no_grad;
    for (auto g : grads_of(params)) mul_(g, clip_coef);
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  if (!(clip_value >= 0)) throw ValueError("clip_grad_value_: clip_value must be >= 0, got " + std::to_string(clip_value));
  NoGradGuard no_grad;
  for (auto g : grads_of(params)) clamp_(g, -clip_value, clip_value);
}

}  // namespace ember::optim

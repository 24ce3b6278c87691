#include "optim/adam.h"

#include <cmath>

#include "tensor/error.h"
#include "tensor/ops.h"

namespace ember::optim {

GroupOptions AdamOptions::to_map() const {
  return {{"lr", lr}, {"beta1", beta1}, {"beta2", beta2}, {"eps", eps}, {"weight_decay", weight_decay},
          {"amsgrad", amsgrad ? 1.0 : 0.0}};
}

AdamOptions AdamOptions::from(const GroupOptions& o) {
  AdamOptions a;
  a.lr = o.at("lr");
  a.beta1 = o.at("beta1");
  a.beta2 = o.at("beta2");
  a.eps = o.at("eps");
  a.weight_decay = o.at("weight_decay");
  a.amsgrad = o.at("amsgrad") != 0;
  return a;
}

GroupOptions LAMBOptions::to_map() const {
  return {{"lr", lr}, {"beta1", beta1}, {"beta2", beta2}, {"eps", eps}, {"weight_decay", weight_decay}};
}

LAMBOptions LAMBOptions::from(const GroupOptions& o) {
  LAMBOptions a;
  a.lr = o.at("lr");
  a.beta1 = o.at("beta1");
  a.beta2 = o.at("beta2");
  a.eps = o.at("eps");
  a.weight_decay = o.at("weight_decay");
  return a;
}

namespace {

void check(const char* who, double lr, double b1, double b2, double eps, double wd) {
  const std::string w(who);
  if (lr < 0) throw ValueError(w + ": invalid lr " + std::to_string(lr));
  if (eps < 0) throw ValueError(w + ": invalid eps " + std::to_string(eps));
  if (!(b1 >= 0 && b1 < 1)) throw ValueError(w + ": invalid beta1 " + std::to_string(b1) + " (need 0 <= beta1 < 1)");
  if (!(b2 >= 0 && b2 < 1)) throw ValueError(w + ": invalid beta2 " + std::to_string(b2) + " (need 0 <= beta2 < 1)");
  if (wd < 0) throw ValueError(w + ": invalid weight_decay " + std::to_string(wd));
}

// Advances st["step"] and returns the new count.
double next_step(ParamState& st) {
  auto it = st.find("step");
  const double step = it == st.end() ? 1.0 : it->second.item<double>() + 1.0;
  st["step"] = scalar_f64(step);
  return step;
}

// The state tensor `key`, created as zeros like p on first use.
Tensor& moment(ParamState& st, const char* key, const Tensor& p) {
  auto it = st.find(key);
  if (it == st.end()) it = st.emplace(key, zeros_like(p)).first;
  return it->second;
}

// m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2
void update_moments(Tensor& m, Tensor& v, const Tensor& g, double b1, double b2) {
  mul_(m, b1);
  add_(m, mul(g, 1.0 - b1));
  mul_(v, b2);
  add_(v, mul(mul(g, g), 1.0 - b2));
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions o, bool decoupled)
    : Optimizer(o.to_map()), decoupled_(decoupled) {
  check(decoupled ? "AdamW" : "Adam", o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  add_param_group(std::move(params));
}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, true) {}

// PyTorch torch/optim/adam.py and adamw.py (_single_tensor_adam), Kingma & Ba 2015, Loshchilov &
// Hutter 2019 (decoupled decay):
//   Adam: g += wd * p;  AdamW: p *= 1 - lr * wd
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  (amsgrad: vmax = max(vmax, v), used for v)
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
void Adam::update(const ParamGroup& group, Tensor& p, const Tensor& grad, ParamState& st) {
  const AdamOptions o = AdamOptions::from(group.options);
  const double step = next_step(st);
  Tensor g = grad;
  if (o.weight_decay != 0) {
    if (decoupled_) mul_(p, 1.0 - o.lr * o.weight_decay);
    else g = add(grad, mul(p, o.weight_decay));
  }
  Tensor& m = moment(st, "exp_avg", p);
  Tensor& v = moment(st, "exp_avg_sq", p);
  update_moments(m, v, g, o.beta1, o.beta2);
  const double bias_correction1 = 1.0 - std::pow(o.beta1, step);
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(o.beta2, step));
  Tensor second = v;
  if (o.amsgrad) {
    Tensor& vmax = moment(st, "max_exp_avg_sq", p);
    copy_(vmax, maximum(vmax, v));
    second = vmax;
  }
  Tensor denom = add(div(sqrt(second), bias_correction2_sqrt), o.eps);
  add_(p, mul(div(m, denom), -o.lr / bias_correction1));
}

LAMB::LAMB(std::vector<Tensor> params, LAMBOptions o) : Optimizer(o.to_map()) {
  check("LAMB", o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  add_param_group(std::move(params));
}

// You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes"
// (arXiv:1904.00962), Algorithm 2 with phi = identity:
//   m, v as Adam;  r = m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd * p
//   p -= lr * (|p| / |r|) * r, the trust ratio taken as 1 when either norm is 0
void LAMB::update(const ParamGroup& group, Tensor& p, const Tensor& grad, ParamState& st) {
  const LAMBOptions o = LAMBOptions::from(group.options);
  const double step = next_step(st);
  Tensor& m = moment(st, "exp_avg", p);
  Tensor& v = moment(st, "exp_avg_sq", p);
  update_moments(m, v, grad, o.beta1, o.beta2);
  const double bias_correction1 = 1.0 - std::pow(o.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(o.beta2, step);
  Tensor r = div(div(m, bias_correction1), add(sqrt(div(v, bias_correction2)), o.eps));
  if (o.weight_decay != 0) r = add(r, mul(p, o.weight_decay));
  const double p_norm = norm(p).item<double>();
  const double r_norm = norm(r).item<double>();
  const double trust = p_norm > 0 && r_norm > 0 ? p_norm / r_norm : 1.0;
  add_(p, mul(r, -o.lr * trust));
}

}  // namespace ember::optim

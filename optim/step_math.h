// The per-element math of the optimizer steps and of the gradient norm, compiled for host and device
// so that cpu/optim.cpp and cuda/optim.cu run the same formulas. Math in float for f32/f16/bf16,
// in double for f64; hyperparameters arrive as host doubles, the scheduled ones from device memory.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tensor/convert.h"
#include "tensor/math.h"

namespace ember::optim {

// Elements per chunk of the multi-tensor kernels: a CUDA block's share of one tensor, and the unit
// in which LAMB and the gradient norm sum partial results (in a fixed order on both backends).
inline constexpr int64_t kStepChunk = 65536;

template <class T>
using step_compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

struct SGDStepParams {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};

struct AdamStepParams {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, decoupled;  // decoupled: AdamW's decay of the weights instead of L2 on the gradient
};

struct LAMBStepParams {
  double lr, beta1, beta2, eps, weight_decay;
};

// The hyperparameters with the scheduled ones a step's kernels read from memory: {lr, momentum} for
// SGD, {lr, beta1} for Adam and LAMB (optim/primitives/steps.h; what the schedulers change per step).
template <class H>
EMBER_HD inline H with_scheduled(H h, const double* scheduled) {
  h.lr = scheduled[0];
  if constexpr (requires { h.momentum; })
    h.momentum = scheduled[1];
  else
    h.beta1 = scheduled[1];
  return h;
}

// The bias corrections of an Adam or LAMB step whose new count is `step` (computed in double, as
// PyTorch does on the host): 1 - b1^t, 1 - b2^t and its square root.
struct BiasCorrection {
  double c1, c2, c2_sqrt;
};
EMBER_HD inline BiasCorrection bias_correction(double beta1, double beta2, double step) {
  const double c2 = 1.0 - math::pow(beta2, step);
  return {1.0 - math::pow(beta1, step), c2, std::sqrt(c2)};
}

// PyTorch torch/optim/sgd.py (_single_tensor_sgd):
//   g += wd * p;  buf = g (first step) or momentum * buf + (1 - dampening) * g;
//   g = nesterov ? g + momentum * buf : buf;  p -= lr * g
// buf is null without momentum; g is the stored gradient divided by `scale`.
template <class T>
EMBER_HD inline void sgd_element(const SGDStepParams& h, T* p, const T* grad, T* buf, bool first, float scale,
                                 int64_t i) {
  using C = step_compute_t<T>;
  C pv = convert<C>(p[i]);
  C g = convert<C>(grad[i]) / C(scale);
  if (h.weight_decay != 0) g = g + pv * C(h.weight_decay);
  if (buf) {
    C b = first ? g : convert<C>(buf[i]) * C(h.momentum) + g * C(1.0 - h.dampening);
    buf[i] = convert<T>(b);
    b = convert<C>(buf[i]);  // as stored, as the next step will read it
    g = h.nesterov ? g + b * C(h.momentum) : b;
  }
  p[i] = convert<T>(pv + g * C(-h.lr));
}

// m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2, stored back in T.
template <class T, class C>
EMBER_HD inline void update_moments(C g, double beta1, double beta2, T* m, T* v, int64_t i) {
  m[i] = convert<T>(convert<C>(m[i]) * C(beta1) + g * C(1.0 - beta1));
  v[i] = convert<T>(convert<C>(v[i]) * C(beta2) + g * g * C(1.0 - beta2));
}

// PyTorch torch/optim/adam.py and adamw.py (_single_tensor_adam), Kingma & Ba 2015, Loshchilov &
// Hutter 2019 (decoupled decay):
//   Adam: g += wd * p;  AdamW: p *= 1 - lr * wd
//   m, v as update_moments;  (amsgrad: vmax = max(vmax, v), used for v)
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// vmax is null without amsgrad.
template <class T>
EMBER_HD inline void adam_element(const AdamStepParams& h, const BiasCorrection& bc, T* p, const T* grad, T* m, T* v,
                                  T* vmax, float scale, int64_t i) {
  using C = step_compute_t<T>;
  C pv = convert<C>(p[i]);
  C g = convert<C>(grad[i]) / C(scale);
  if (h.weight_decay != 0) {
    if (h.decoupled) pv = pv * C(1.0 - h.lr * h.weight_decay);
    else g = g + pv * C(h.weight_decay);
  }
  update_moments<T, C>(g, h.beta1, h.beta2, m, v, i);
  C second = convert<C>(v[i]);
  if (vmax) {
    const C old = convert<C>(vmax[i]);
    if (!(second <= old)) vmax[i] = v[i];  // NaN propagates, as maximum() does
    second = convert<C>(vmax[i]);
  }
  const C denom = std::sqrt(second) / C(bc.c2_sqrt) + C(h.eps);
  p[i] = convert<T>(pv + convert<C>(m[i]) / denom * C(-h.lr / bc.c1));
}

// LAMB's update direction from the stored moments (You et al. 2019, arXiv:1904.00962, Algorithm 2
// with phi = identity): r = m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd * p. Both phases
// compute it from the same stored values, so the norm of phase one is the norm of what phase two applies.
template <class T>
EMBER_HD inline step_compute_t<T> lamb_direction(const LAMBStepParams& h, const BiasCorrection& bc, const T* p,
                                                 const T* m, const T* v, int64_t i) {
  using C = step_compute_t<T>;
  C r = convert<C>(m[i]) / C(bc.c1) / (std::sqrt(convert<C>(v[i]) / C(bc.c2)) + C(h.eps));
  if (h.weight_decay != 0) r = r + convert<C>(p[i]) * C(h.weight_decay);
  return r;
}

// LAMB phase one for element i: moments updated; adds p^2 and r^2 to the sums of the norms.
template <class T, class A>
EMBER_HD inline void lamb_moments_element(const LAMBStepParams& h, const BiasCorrection& bc, const T* p, const T* grad,
                                          T* m, T* v, float scale, int64_t i, A& p_sq, A& r_sq) {
  using C = step_compute_t<T>;
  update_moments<T, C>(convert<C>(grad[i]) / C(scale), h.beta1, h.beta2, m, v, i);
  const A pv = convert<C>(p[i]);
  const A r = lamb_direction(h, bc, p, m, v, i);
  p_sq += pv * pv;
  r_sq += r * r;
}

// The trust ratio ||p|| / ||r|| from the sums of squares, 1 when either norm is 0.
EMBER_HD inline double lamb_trust(double p_sq, double r_sq) {
  const double pn = std::sqrt(p_sq), rn = std::sqrt(r_sq);
  return pn > 0 && rn > 0 ? pn / rn : 1.0;
}

// LAMB phase two for element i: p -= lr * trust * r.
template <class T>
EMBER_HD inline void lamb_apply_element(const LAMBStepParams& h, const BiasCorrection& bc, double trust, T* p,
                                        const T* m, const T* v, int64_t i) {
  using C = step_compute_t<T>;
  const C r = lamb_direction(h, bc, p, m, v, i);
  p[i] = convert<T>(convert<C>(p[i]) + r * C(-h.lr * trust));
}

// ---- the total gradient norm: |x|^p summed (or max |x| for p = infinity), then the p-th root.
enum class NormKind { one, two, inf, p };
EMBER_HD inline NormKind norm_kind(double norm_type) {
  if (norm_type == 1.0) return NormKind::one;
  if (norm_type == 2.0) return NormKind::two;
  return std::isinf(norm_type) ? NormKind::inf : NormKind::p;
}
// One element's contribution.
template <class A>
EMBER_HD inline A norm_term(NormKind kind, double norm_type, A x) {
  const A a = x < A(0) ? A(-x) : x;
  switch (kind) {
    case NormKind::two: return a * a;
    case NormKind::p: return math::pow(a, A(norm_type));
    default: return a;
  }
}
// Two partial results combined: a sum, or a NaN-propagating max.
template <class A>
EMBER_HD inline A norm_combine(NormKind kind, A a, A b) {
  if (kind != NormKind::inf) return a + b;
  return (a != a || a > b) ? a : b;
}
// The norm from the combined partials.
EMBER_HD inline double norm_finish(NormKind kind, double norm_type, double total) {
  switch (kind) {
    case NormKind::two: return std::sqrt(total);
    case NormKind::p: return math::pow(total, 1.0 / norm_type);
    default: return total;
  }
}

}  // namespace ember::optim

// The optimizer steps as primitives over many parameters at once (multi-tensor): SGD, Adam/AdamW
// and LAMB. CPU kernels in cpu/optim.cpp, CUDA kernels in cuda/optim.{cpp,cu}; not differentiable.
#pragma once

#include "optim/step_math.h"
#include "tensor/primitive.h"

namespace ember {

// Where a step primitive finds its tensors. Inputs: {[found_inf], [grad_scale], scheduled, grad_0 ..
// grad_{n-1}}, the two device scalars (0-dim f32) present as the flags say; `scheduled` two f64 on the
// device, {lr, momentum or beta1}, which the kernels read in place of the parameters' (so that a
// captured step follows a schedule, OneCycleLR's cycled momentum too). Updated in place, the "outputs":
// operand k of parameter i at [k * n + i]; operand 0 is the parameters, the state tensors follow
// (each optimizer lists its own) and the 0-dim f64 step counts come last. Every tensor is contiguous;
// a gradient and the state have their parameter's shape and dtype.
struct StepLayout {
  int64_t n = 0;
  bool has_found_inf = false, has_grad_scale = false;

  const Tensor* found_inf(const std::vector<Tensor>& in) const { return has_found_inf ? &in[0] : nullptr; }
  const Tensor* grad_scale(const std::vector<Tensor>& in) const {
    return has_grad_scale ? &in[has_found_inf ? 1 : 0] : nullptr;
  }
  const Tensor& scheduled(const std::vector<Tensor>& in) const {
    return in[static_cast<size_t>(has_found_inf + has_grad_scale)];
  }
  const Tensor& grad(const std::vector<Tensor>& in, int64_t i) const {
    return in[static_cast<size_t>(i + 1 + has_found_inf + has_grad_scale)];
  }
  const Tensor& operand(const std::vector<Tensor>& out, int k, int64_t i) const {
    return out[static_cast<size_t>(k * n + i)];
  }
};

// Operands {p, [momentum_buffer, step]}: the buffer and its step count only with momentum != 0
// (a count of 0 marks the first step, which copies the gradient into the buffer).
class SGDStep final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  SGDStep(StepLayout l, optim::SGDStepParams h) : l_(l), h_(h) {}
  const char* name() const override { return "sgd_step"; }
  EMBER_PRIMITIVE_KERNELS;

 private:
  StepLayout l_;
  optim::SGDStepParams h_;
};

// Operands {p, exp_avg, exp_avg_sq, [max_exp_avg_sq with amsgrad], step}.
class AdamStep final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  AdamStep(StepLayout l, optim::AdamStepParams h) : l_(l), h_(h) {}
  const char* name() const override { return h_.decoupled ? "adamw_step" : "adam_step"; }
  EMBER_PRIMITIVE_KERNELS;

 private:
  StepLayout l_;
  optim::AdamStepParams h_;
};

// Operands {p, exp_avg, exp_avg_sq, step}. Two phases: moments and the two norms per parameter,
// then the update scaled by each parameter's trust ratio.
class LAMBStep final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  LAMBStep(StepLayout l, optim::LAMBStepParams h) : l_(l), h_(h) {}
  const char* name() const override { return "lamb_step"; }
  EMBER_PRIMITIVE_KERNELS;

 private:
  StepLayout l_;
  optim::LAMBStepParams h_;
};

}  // namespace ember

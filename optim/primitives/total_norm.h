// The norm of many gradients taken together as one vector, as a primitive over all of them at once
// (multi-tensor). CPU kernel in cpu/optim.cpp, CUDA kernel in cuda/optim.{cpp,cu}.
#pragma once

#include "tensor/primitive.h"

namespace ember {

// Inputs {x_0 .. x_{n-1}} (contiguous, floating, n >= 1): output a 0-dim tensor, f64 when any
// input is f64 and f32 otherwise, holding (sum |x|^p)^(1/p), or max |x| for p = infinity (NaN
// propagates). Partial sums are taken per chunk and combined in a fixed order.
class TotalNorm final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  explicit TotalNorm(double norm_type) : norm_type_(norm_type) {}
  const char* name() const override { return "total_norm"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;

 private:
  double norm_type_;
};

}  // namespace ember

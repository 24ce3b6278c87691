// The node at a leaf: runs the leaf's hooks, adds the incoming gradient into leaf.grad, then
// runs its post-accumulate-grad hooks (where DDP and ZeRO start their reductions).
#pragma once

#include "autograd/node.h"

namespace ember::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  const char* name() const override { return "accumulate_grad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
};

}  // namespace ember::autograd

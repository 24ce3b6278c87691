/// @file
/// The node at a leaf: runs the leaf's hooks, adds the incoming gradient into leaf.grad, then
/// runs its post-accumulate-grad hooks (where DDP and ZeRO start their reductions).
#pragma once

#include "autograd/node.h"

namespace ember::autograd {

/// The backward node of a leaf that requires grad: the end of every path to it (see the file's
/// description).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);  ///< The node of leaf `variable`.
  const char* name() const override { return "accumulate_grad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  const Tensor& variable() const { return variable_; }  ///< The leaf.

 private:
  Tensor variable_;
};

}  // namespace ember::autograd

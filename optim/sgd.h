/// @file
/// SGD with momentum, dampening, nesterov and L2 weight decay (PyTorch's torch.optim.SGD). With
/// momentum, each parameter's state is its "momentum_buffer" and a "step" count (0 until its first step).
#pragma once

#include "optim/optimizer.h"

namespace ember::optim {

/// SGD's hyperparameters, with PyTorch's defaults.
struct SGDOptions {
  double lr = 1e-3;             ///< PyTorch's default
  double momentum = 0;          ///< momentum factor; 0: plain SGD, no state
  double dampening = 0;         ///< the gradient counts (1 - dampening) in the momentum buffer
  double weight_decay = 0;      ///< L2 penalty, added to the gradient
  bool nesterov = false;        ///< Nesterov momentum (needs momentum > 0 and dampening 0)
  GroupOptions to_map() const;  ///< The options as a param group's map ("nesterov" as 0/1).
  static SGDOptions from(const GroupOptions& o);  ///< The options a param group's map holds.
};

/// Stochastic gradient descent with momentum (torch.optim.SGD).
class SGD final : public Optimizer {
 public:
  /// ValueError on a negative lr, momentum or weight_decay, and on nesterov without momentum > 0
  /// and dampening == 0.
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  const char* name() const override { return "SGD"; }

 protected:
  void step_group(const ParamGroup& group, const Batch& batch) override;
  void check_options(const GroupOptions& options) const override;
};

}  // namespace ember::optim

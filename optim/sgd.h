// SGD with momentum, dampening, nesterov and L2 weight decay (PyTorch's torch.optim.SGD). With
// momentum, each parameter's state is its "momentum_buffer" and a "step" count (0 until its first step).
#pragma once

#include "optim/optimizer.h"

namespace ember::optim {

struct SGDOptions {
  double lr = 1e-3;  // PyTorch's default
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  GroupOptions to_map() const;
  static SGDOptions from(const GroupOptions& o);
};

class SGD final : public Optimizer {
 public:
  // ValueError on a negative lr, momentum or weight_decay, and on nesterov without momentum > 0
  // and dampening == 0.
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  const char* name() const override { return "SGD"; }

 protected:
  void step_group(const ParamGroup& group, const Batch& batch) override;
};

}  // namespace ember::optim

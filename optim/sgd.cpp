#include "optim/sgd.h"

#include <cmath>

#include "optim/primitives/steps.h"
#include "tensor/decimal.h"
#include "tensor/error.h"

namespace ember::optim {

GroupOptions SGDOptions::to_map() const {
  return {{"lr", lr}, {"momentum", momentum}, {"dampening", dampening}, {"weight_decay", weight_decay},
          {"nesterov", nesterov ? 1.0 : 0.0}};
}

SGDOptions SGDOptions::from(const GroupOptions& o) {
  SGDOptions s;
  s.lr = o.at("lr");
  s.momentum = o.at("momentum");
  s.dampening = o.at("dampening");
  s.weight_decay = o.at("weight_decay");
  s.nesterov = o.at("nesterov") != 0;
  return s;
}

namespace {
void check(const SGDOptions& o) {
  // Written !(x >= 0) so that NaN is refused too; infinity is no rate either.
  if (!(o.lr >= 0 && o.lr < HUGE_VAL)) throw ValueError("SGD: invalid lr " + decimal_text(o.lr));
  if (!(o.momentum >= 0 && o.momentum < HUGE_VAL)) throw ValueError("SGD: invalid momentum " + decimal_text(o.momentum));
  if (!(o.weight_decay >= 0 && o.weight_decay < HUGE_VAL))
    throw ValueError("SGD: invalid weight_decay " + decimal_text(o.weight_decay));
  if (!std::isfinite(o.dampening)) throw ValueError("SGD: invalid dampening " + decimal_text(o.dampening));
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw ValueError("SGD: nesterov needs momentum > 0 and dampening == 0 (momentum " + decimal_text(o.momentum) +
                     ", dampening " + decimal_text(o.dampening) + ")");
}
}  // namespace

void SGD::check_options(const GroupOptions& options) const {
  if (const double n = options.at("nesterov"); n != 0 && n != 1)
    throw ValueError("SGD: invalid nesterov " + decimal_text(n) + " (0 or 1)");
  check(SGDOptions::from(options));
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer(options.to_map()) {
  add_param_group(std::move(params));  // checks the options first
}

// The formulas (PyTorch's _single_tensor_sgd) are in optim/step_math.h. With momentum each buffer
// has a step count: the first step (count 0) copies the gradient into the buffer, and a step the
// kernel skips leaves the count at 0. A buffer loaded without a count (a dict saved before counts
// existed) is past its first step.
void SGD::step_group(const ParamGroup& group, const Batch& batch) {
  const SGDOptions o = SGDOptions::from(group.options);
  std::vector<Tensor> updated = batch.params;
  if (o.momentum != 0) {
    for (size_t i = 0; i < batch.params.size(); ++i) {
      ParamState& st = *batch.states[i];
      if (st.count("momentum_buffer") && !st.count("step")) st.emplace("step", scalar_f64(1).to(batch.params[i].device()));
    }
    updated = step_operands(batch, {"momentum_buffer"});
  }
  SGDStep prim(StepLayout{static_cast<int64_t>(batch.params.size()), batch.has_found_inf, batch.has_grad_scale},
               SGDStepParams{o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov});
  run_update(prim, batch.inputs, updated);
}

}  // namespace ember::optim

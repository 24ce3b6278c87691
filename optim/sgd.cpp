#include "optim/sgd.h"

#include "tensor/error.h"
#include "tensor/ops.h"

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
  if (o.lr < 0) throw ValueError("SGD: invalid lr " + std::to_string(o.lr));
  if (o.momentum < 0) throw ValueError("SGD: invalid momentum " + std::to_string(o.momentum));
  if (o.weight_decay < 0) throw ValueError("SGD: invalid weight_decay " + std::to_string(o.weight_decay));
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw ValueError("SGD: nesterov needs momentum > 0 and dampening == 0 (momentum " + std::to_string(o.momentum) +
                     ", dampening " + std::to_string(o.dampening) + ")");
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer(options.to_map()) {
  check(options);
  add_param_group(std::move(params));
}

// PyTorch torch/optim/sgd.py (_single_tensor_sgd):
//   g += wd * p;  buf = g (first step) or momentum * buf + (1 - dampening) * g;
//   g = nesterov ? g + momentum * buf : buf;  p -= lr * g
void SGD::update(const ParamGroup& group, Tensor& p, const Tensor& grad, ParamState& st) {
  const SGDOptions o = SGDOptions::from(group.options);
  Tensor g = o.weight_decay != 0 ? add(grad, mul(p, o.weight_decay)) : grad;
  if (o.momentum != 0) {
    auto it = st.find("momentum_buffer");
    Tensor buf;
    if (it == st.end()) {
      buf = clone(g);
      st["momentum_buffer"] = buf;
    } else {
      buf = it->second;
      mul_(buf, o.momentum);
      add_(buf, mul(g, 1.0 - o.dampening));
    }
    g = o.nesterov ? add(g, mul(buf, o.momentum)) : buf;
  }
  add_(p, mul(g, -o.lr));
}

}  // namespace ember::optim

#include "optim/amp/master_weights.h"

#include <string>

#include "autograd/grad_mode.h"
#include "optim/amp/primitives.h"
#include "tensor/capture.h"
#include "tensor/error.h"
#include "tensor/nvtx.h"
#include "tensor/ops.h"

namespace ember::amp {

MasterWeightOptimizer::MasterWeightOptimizer(std::vector<Tensor> model_params, const InnerFactory& make_inner,
                                             MasterWeightOptions options)
    : params_(std::move(model_params)), options_(options) {
  if (params_.empty()) throw ValueError("MasterWeightOptimizer: no parameters");
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!is_reduced_float(p.dtype()) && p.dtype() != DType::f32)
      throw ValueError("MasterWeightOptimizer: parameter " + std::to_string(i) + " is " + dtype_name(p.dtype()) +
                       " (expected float16, bfloat16 or float32)");
    if (!p.is_contiguous())
      throw ValueError("MasterWeightOptimizer: parameter " + std::to_string(i) + " (shape " + to_string(p.shape()) +
                       ") is not contiguous");
    if (p.dtype() == DType::f32 && (!options_.on_host || p.device().is_cpu())) {
      masters_.push_back(p);
      continue;
    }
    Tensor m = p.detach().to(options_.on_host ? kCPU : p.device()).to(DType::f32).contiguous();
    m.requires_grad_(true);
    masters_.push_back(m);
  }
  inner_ = make_inner(masters_);
}

Tensor MasterWeightOptimizer::unscale_grads(const Tensor& inv_scale) {
  NoGradGuard no_grad;
  const Device device = masters_[0].device();
  const std::vector<Tensor> inputs = {inv_scale.defined() ? inv_scale.to(device)
                                                          : ones({}, TensorOptions(DType::f32).with_device(device))};
  std::vector<Tensor> updated = {zeros({}, TensorOptions(DType::f32).with_device(device))};
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].grad();
    if (!g.defined()) {
      if (!masters_[i].is_same(params_[i])) masters_[i].set_grad(Tensor());
      continue;
    }
    const Tensor master_grad = masters_[i].is_same(params_[i]) ? g.contiguous() : g.to(device).to(DType::f32).contiguous();
    masters_[i].set_grad(master_grad);
    updated.push_back(master_grad);
  }
  AmpUnscale unscale;
  run_update(unscale, inputs, updated);
  return updated[0];
}

void MasterWeightOptimizer::step(const Tensor& found_inf) {
  const nvtx::Range range("MasterWeightOptimizer.step");
  NoGradGuard no_grad;
  const Device device = masters_[0].device();
  const Tensor skip = found_inf.defined() ? found_inf.to(device) : zeros({}, TensorOptions(DType::f32).with_device(device));
  inner_->step(optim::StepInputs{skip, Tensor()});
  std::vector<Tensor> inputs = {skip};
  std::vector<Tensor> targets;  // the parameters that are not their own masters, or their host copies
  for (size_t i = 0; i < params_.size(); ++i)
    if (!masters_[i].is_same(params_[i])) {
      inputs.push_back(masters_[i]);
      targets.push_back(params_[i].device() == device ? params_[i] : empty(params_[i].shape(), params_[i].dtype()));
    }
  if (targets.empty()) return;
  const bool offloaded = !(params_[0].device() == device);
  // On the host the skip is known there: nothing travels back after an overflow.
  if (offloaded) capture::refuse("MasterWeightOptimizer.step with host (offloaded) parameters reads found_inf on the host");
  if (offloaded && skip.item<float>() != 0) return;
  if (options_.stochastic_rounding)  // its per-step counter lives on the host: each replay would draw the same bits
    capture::refuse("MasterWeightOptimizer.step with stochastic rounding counts its copy-backs on the host");
  MasterCopyBack copy_back({options_.stochastic_rounding, options_.seed, copy_backs_++});
  run_update(copy_back, inputs, targets);
  if (!offloaded) return;
  size_t k = 0;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!masters_[i].is_same(params_[i])) copy_(params_[i], targets[k++]);
}

void MasterWeightOptimizer::zero_grad() {
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].set_grad(Tensor());
    masters_[i].set_grad(Tensor());
  }
}

StateDict MasterWeightOptimizer::state_dict() const {
  StateDict dict;
  for (auto& [key, value] : inner_->state_dict()) dict["optimizer." + key] = value;
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!masters_[i].is_same(params_[i])) dict["master." + std::to_string(i)] = masters_[i].to(kCPU).clone();
  if (options_.stochastic_rounding) {
    dict["stochastic_rounding.seed"] = scalar_tensor(static_cast<int64_t>(options_.seed), DType::i64);
    dict["stochastic_rounding.step"] = scalar_tensor(static_cast<int64_t>(copy_backs_), DType::i64);
  }
  return dict;
}

void MasterWeightOptimizer::load_state_dict(const StateDict& dict) {
  StateDict inner;
  const std::string prefix = "optimizer.";
  for (const auto& [key, value] : dict)
    if (key.rfind(prefix, 0) == 0) inner[key.substr(prefix.size())] = value;
  // Check every master before changing anything.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (masters_[i].is_same(params_[i])) continue;
    const std::string key = "master." + std::to_string(i);
    auto it = dict.find(key);
    if (it == dict.end()) throw ValueError("MasterWeightOptimizer.load_state_dict: missing \"" + key + "\"");
    if (!(it->second.shape() == masters_[i].shape()))
      throw ValueError("MasterWeightOptimizer.load_state_dict: \"" + key + "\" has shape " + to_string(it->second.shape()) +
                       ", the parameter " + to_string(masters_[i].shape()));
  }
  uint64_t seed = options_.seed, copy_backs = copy_backs_;
  if (options_.stochastic_rounding) {
    for (const char* key : {"stochastic_rounding.seed", "stochastic_rounding.step"})
      if (!dict.count(key)) throw ValueError(std::string("MasterWeightOptimizer.load_state_dict: missing \"") + key + "\"");
    seed = static_cast<uint64_t>(dict.at("stochastic_rounding.seed").item<int64_t>());
    copy_backs = static_cast<uint64_t>(dict.at("stochastic_rounding.step").item<int64_t>());
  }
  inner_->load_state_dict(inner);
  options_.seed = seed;
  copy_backs_ = copy_backs;
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (masters_[i].is_same(params_[i])) continue;
    copy_(masters_[i], dict.at("master." + std::to_string(i)));
    copy_(params_[i], masters_[i]);
  }
}

}  // namespace ember::amp

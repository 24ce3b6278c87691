// Optimizer: the base of SGD, Adam, AdamW and LAMB (PyTorch's torch.optim.Optimizer). It holds
// param groups with their hyperparameters, per-parameter state tensors, step() and zero_grad().
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/state_dict.h"
#include "tensor/tensor.h"

namespace ember::optim {

// Hyperparameters by PyTorch's names ("lr", "momentum", "weight_decay"; Adam's betas as "beta1",
// "beta2"; booleans as 0/1). Each optimizer's Options struct converts to and from this map.
using GroupOptions = std::map<std::string, double>;

struct ParamGroup {
  std::vector<Tensor> params;
  GroupOptions options;
  // The value of option `key`; ValueError when the group lacks it.
  double get(const std::string& key) const;
  double lr() const { return get("lr"); }
  void set_lr(double lr) { options["lr"] = lr; }
};

// The state of one parameter: "step", "exp_avg", "momentum_buffer", ...
using ParamState = std::map<std::string, Tensor>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Adds a group; options it does not set are taken from the optimizer's defaults.
  void add_param_group(std::vector<Tensor> params, const GroupOptions& overrides = {});
  // Updates every parameter that has a gradient (an undefined grad skips it), in place, under
  // NoGradGuard. Only call it when the step is really taken: schedulers step after it.
  void step();
  // Sets each gradient to none (default), or zeroes it in place.
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const GroupOptions& defaults() const { return defaults_; }
  // State of parameter `index`, counted across groups in order (PyTorch's state_dict numbering).
  const ParamState& state(int64_t index) const;
  int64_t num_params() const;
  int64_t steps_taken() const { return steps_taken_; }  // calls of step(), for schedulers' checks

  // Flat names, PyTorch's layout with dotted keys:
  //   "state.<i>.<name>"          per-parameter state, i counted across groups ("state.3.exp_avg",
  //                               "state.3.step" as a 0-dim f64 tensor)
  //   "param_groups.<g>.<option>" each hyperparameter as a 0-dim f64 tensor ("param_groups.0.lr")
  //   "param_groups.<g>.params"   the group's parameter indices, a 1-D i64 tensor
  // The tensors are copies: later steps do not change a saved dict.
  StateDict state_dict() const;
  // Restores state and hyperparameters saved from an optimizer of the same kind over parameters of
  // the same shapes. ValueError (naming the entry) on a different number of groups or parameters,
  // a state tensor whose shape differs from its parameter's, or an unknown key.
  void load_state_dict(const StateDict& dict);

 protected:
  Optimizer(GroupOptions defaults) : defaults_(std::move(defaults)) {}
  // One parameter's update: p and grad of the same shape, st its state (empty before the first step).
  virtual void update(const ParamGroup& group, Tensor& p, const Tensor& grad, ParamState& st) = 0;
  virtual const char* name() const = 0;

 private:
  GroupOptions defaults_;
  std::vector<ParamGroup> groups_;
  std::map<int64_t, ParamState> state_;
  int64_t steps_taken_ = 0;
};

// A 0-dim f64 CPU tensor holding v (how hyperparameters and step counts are saved).
Tensor scalar_f64(double v);

}  // namespace ember::optim

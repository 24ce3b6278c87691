/// @file
/// Optimizer: the base of SGD, Adam, AdamW and LAMB (PyTorch's torch.optim.Optimizer). It holds
/// param groups with their hyperparameters, per-parameter state tensors, step() and zero_grad().
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/state_dict.h"
#include "tensor/tensor.h"

namespace ember::optim {

/// Hyperparameters by PyTorch's names ("lr", "momentum", "weight_decay"; Adam's betas as "beta1",
/// "beta2"; booleans as 0/1). Each optimizer's Options struct converts to and from this map.
using GroupOptions = std::map<std::string, double>;

/// Parameters that share hyperparameters (torch.optim param_groups).
struct ParamGroup {
  std::vector<Tensor> params;  ///< the parameters, in order
  GroupOptions options;        ///< their hyperparameters by name
  /// The value of option `key`; ValueError when the group lacks it.
  double get(const std::string& key) const;
  double lr() const { return get("lr"); }         ///< The learning rate.
  void set_lr(double lr) { options["lr"] = lr; }  ///< Sets the learning rate (what schedulers do).
};

/// The state of one parameter: "step", "exp_avg", "momentum_buffer", ... on the parameter's device;
/// "step" is a 0-dim f64 tensor, advanced by the step kernels themselves.
using ParamState = std::map<std::string, Tensor>;

/// Device-resident inputs of a step, read by the kernels and never on the host (PyTorch's fused
/// optimizers take the same two): found_inf nonzero skips the whole step; grad_scale divides
/// every gradient before use.
struct StepInputs {
  Tensor found_inf{};   ///< 0-dim float32 on the parameters' device, or undefined (never skip)
  Tensor grad_scale{};  ///< 0-dim float32 on the parameters' device, or undefined (no scaling)
};

/// The base of the optimizers (torch.optim.Optimizer; see the file's description). The loop is
/// PyTorch's: zero_grad(), backward, step().
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Adds a group; options it does not set are taken from the optimizer's defaults. ValueError for
  /// an empty or undefined parameter list, a parameter already in a group or an unknown option;
  /// DTypeError for a parameter that is not floating.
  void add_param_group(std::vector<Tensor> params, const GroupOptions& overrides = {});
  /// Updates every parameter that has a gradient (an undefined grad skips it), in place, under
  /// NoGradGuard, with one multi-tensor step primitive per group and no host synchronisation. A step
  /// that found_inf skips leaves parameters and state bit-identical (step counts included). Gradients
  /// must have their parameter's shape, dtype and device, and parameters must be contiguous
  /// (ShapeError, DTypeError, DeviceError, ValueError naming the parameter); found_inf and grad_scale
  /// must be one-element f32 tensors on the parameters' device (DTypeError, DeviceError).
  void step(const StepInputs& inputs = {});
  /// Writes each group's lr and its momentum (SGD) or beta1 (Adam, LAMB), the values schedulers change,
  /// into the f64 device tensor the step kernels read them from (where they changed). step() does so
  /// itself, except in a captured step (tensor/capture.h), whose replays read the tensor:
  /// train::CompiledStep stages before each replay.
  void stage_hyperparameters();
  /// Every group's hyperparameters that the step kernels take as launch arguments, in group order:
  /// all but those stage_hyperparameters() stages (momentum counts as on or off, which changes the
  /// step's work). A captured step must be captured again when they change.
  std::vector<double> launch_hyperparameters() const;
  /// Sets each gradient to none (default), or zeroes it in place.
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }  ///< The param groups, in order.
  const std::vector<ParamGroup>& param_groups() const { return groups_; }  ///< The param groups, in order.
  const GroupOptions& defaults() const { return defaults_; }  ///< The options a new group takes where it sets none.
  /// State of parameter `index`, counted across groups in order (PyTorch's state_dict numbering).
  const ParamState& state(int64_t index) const;
  int64_t num_params() const;  ///< Parameters over all groups.
  int64_t steps_taken() const { return steps_taken_; }  ///< The calls of step() so far, skipped ones too.
  /// Whether each element's update depends only on that element's gradient and state, so that any
  /// slice of a parameter can be stepped alone (ZeRO steps shards): all but LAMB, whose trust ratio
  /// takes whole-parameter norms.
  virtual bool is_elementwise() const { return true; }
  /// The optimizer's name: "SGD", "Adam", "AdamW", "LAMB".
  virtual const char* name() const = 0;

  /// The state and hyperparameters under flat names, PyTorch's layout with dotted keys:
  ///   "state.<i>.<name>"          per-parameter state, i counted across groups ("state.3.exp_avg",
  ///                               "state.3.step" as a 0-dim f64 tensor)
  ///   "param_groups.<g>.<option>" each hyperparameter as a 0-dim f64 tensor ("param_groups.0.lr")
  ///   "param_groups.<g>.params"   the group's parameter indices, a 1-D i64 tensor
  /// The tensors are CPU copies: later steps do not change a saved dict.
  StateDict state_dict() const;
  /// Restores state and hyperparameters saved from an optimizer of the same kind over parameters of
  /// the same shapes. As PyTorch's, a state index is the parameter's id in the dict's "params" lists,
  /// matched to the optimizer's parameters by position. ValueError (naming the entry) on a different
  /// number of groups or parameters, ids given twice or naming no parameter, a state tensor whose
  /// shape differs from its parameter's, a step that is no count, options the optimizer's constructor
  /// would refuse, or an unknown key; nothing changes then.
  void load_state_dict(const StateDict& dict);

 protected:
  /// An optimizer with `defaults` and no group yet; a derived constructor adds the first.
  Optimizer(GroupOptions defaults) : defaults_(std::move(defaults)) {}
  /// The parameters of one group that have a gradient, with their state (empty before their first
  /// step) and the step primitives' inputs {[found_inf], [grad_scale], lr, grads...}.
  struct Batch {
    std::vector<Tensor> params;       ///< the parameters that have a gradient
    std::vector<ParamState*> states;  ///< their states, in the same order
    std::vector<Tensor> inputs;       ///< {[found_inf], [grad_scale], lr, grads...}
    /// whether inputs starts with found_inf, then grad_scale @{
    bool has_found_inf = false, has_grad_scale = false;
    /// @}
  };
  /// Updates one group's batch in place (one step primitive over all of it).
  virtual void step_group(const ParamGroup& group, const Batch& batch) = 0;
  /// ValueError naming the option when a param group's options are out of the optimizer's range
  /// (what its constructor refuses): checked for every group added and every state dict loaded.
  virtual void check_options(const GroupOptions& options) const = 0;

  /// The tensors a step primitive updates, in the order of optim/primitives/steps.h's StepLayout: the
  /// parameters, then state `keys` of every parameter in turn (zeros like it on first use), then the
  /// "step" counts (0 on first use, on the parameter's device).
  static std::vector<Tensor> step_operands(const Batch& batch, const std::vector<std::string>& keys);

 private:
  GroupOptions defaults_;
  std::vector<ParamGroup> groups_;
  std::map<int64_t, ParamState> state_;
  int64_t steps_taken_ = 0;
  // Per group: {lr, momentum or beta1} as the kernels read them (f64 on the group's device), and the
  // values written there.
  struct Staged {
    Tensor tensor;
    std::array<double, 2> values{};
  };
  std::vector<Staged> staged_;
};

/// A 0-dim f64 CPU tensor holding v (how hyperparameters and step counts are saved).
Tensor scalar_f64(double v);

}  // namespace ember::optim

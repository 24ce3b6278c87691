/// @file
/// amp::MasterWeightOptimizer: naive AMP's float32 master weights (Apex O2, Colossal-AI fp16_naive,
/// `docs/reference.md#master-weights`). The model holds f16/bf16 parameters; the wrapper owns f32 copies that an
/// ordinary ember optimizer steps, and writes them back into the model after each step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/state_dict.h"

namespace ember::amp {

/// MasterWeightOptimizer's settings.
struct MasterWeightOptions {
  /// bf16 parameters take the masters back by stochastic rounding (unbiased), seeded; f16 ones
  /// round to nearest either way.
  bool stochastic_rounding = false;
  uint64_t seed = 0;  ///< the stochastic rounding's seed
  /// Keep the masters, and so the inner optimizer's state and step, in host memory (ZeRO's
  /// offload_optimizer): every parameter then gets a float32 copy on the CPU, gradients travel there
  /// and the stepped masters back. False: beside the parameters.
  bool on_host = false;
};

/// Steps an f16/bf16 model through float32 master weights (see the file's description):
/// unscale_grads(), step(), zero_grad() in place of an optimizer's step() and zero_grad().
class MasterWeightOptimizer {
 public:
  /// Builds the inner optimizer over the masters (same order as the parameters).
  using InnerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor> masters)>;

  /// A float32 parameter (batch norm kept in f32) is its own master, unless the masters are on the
  /// host and it is not; every other one gets an f32 copy. ValueError when the list is empty or holds
  /// a non-contiguous, non-floating or float64 parameter.
  MasterWeightOptimizer(std::vector<Tensor> model_params, const InnerFactory& make_inner,
                        MasterWeightOptions options = {});

  /// Upcasts the model's gradients into the masters' and multiplies them by inv_scale (0-dim f32;
  /// undefined = 1) in one pass that also checks them for non-finite values. Returns found_inf (0-dim
  /// f32, 1 = overflow) on the masters' device. Parameters without a gradient are left out.
  Tensor unscale_grads(const Tensor& inv_scale = Tensor());
  /// The inner step on the masters, then the masters copied back into the model's parameters in one
  /// multi-tensor pass; both skipped on the device when found_inf (any device) is set, leaving masters
  /// and parameters bit-identical. On the host, the skip is decided there (found_inf read there).
  void step(const Tensor& found_inf = Tensor());
  /// Sets the gradients of the model's parameters and of the masters to none.
  void zero_grad();

  optim::Optimizer& inner() { return *inner_; }  ///< The optimizer that steps the masters.
  /// The float32 masters, one per model parameter in the parameters' order.
  const std::vector<Tensor>& masters() const { return masters_; }
  const std::vector<Tensor>& model_params() const { return params_; }  ///< The model's parameters.

  /// The inner optimizer's dict under "optimizer.", the f32 copies as "master.<i>" (the f32-own
  /// parameters are not repeated), and with stochastic rounding "stochastic_rounding.seed" and
  /// ".step" (the copy-backs so far), so that a resumed run draws the same noise.
  StateDict state_dict() const;
  /// ValueError naming the key on a missing master or one whose shape differs.
  void load_state_dict(const StateDict& dict);

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> masters_;
  std::unique_ptr<optim::Optimizer> inner_;
  MasterWeightOptions options_;
  uint64_t copy_backs_ = 0;  // the random stream's step
};

}  // namespace ember::amp

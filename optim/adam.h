/// @file
/// Adam (optionally AMSGrad) with L2 weight decay, AdamW with decoupled weight decay, and LAMB
/// (layer-wise trust ratio over Adam's update).
#pragma once

#include "optim/optimizer.h"

namespace ember::optim {

/// The defaults that tell Adam's options from AdamW's: torch.optim.Adam's weight_decay is 0,
/// torch.optim.AdamW's 1e-2. (Types, not a double template argument, which clang takes only from 18.)
struct AdamDefaults {
  static constexpr double weight_decay = 0.0;  ///< torch.optim.Adam's
};
/// AdamW's (see AdamDefaults).
struct AdamWDefaults {
  static constexpr double weight_decay = 1e-2;  ///< torch.optim.AdamW's
};

/// Adam's and AdamW's hyperparameters with PyTorch's defaults, which differ only in weight_decay's:
/// two types, so that `AdamW(params, {.lr = 3e-4})` keeps AdamW's decay.
template <class Defaults>
struct AdamFamilyOptions {
  double lr = 1e-3;  ///< learning rate
  /// decay rates of the first and second moment averages @{
  double beta1 = 0.9, beta2 = 0.999;
  /// @}
  double eps = 1e-8;                            ///< added to the denominator's square root
  double weight_decay = Defaults::weight_decay;  ///< Adam: L2, added to the gradient; AdamW: decoupled
  bool amsgrad = false;                         ///< use the running maximum of the second moment (AMSGrad)
  GroupOptions to_map() const;  ///< The options as a param group's map ("beta1", "beta2", "amsgrad" as 0/1, ...).
  static AdamFamilyOptions from(const GroupOptions& o);  ///< The options a param group's map holds.
};
using AdamOptions = AdamFamilyOptions<AdamDefaults>;    ///< torch.optim.Adam's hyperparameters
using AdamWOptions = AdamFamilyOptions<AdamWDefaults>;  ///< torch.optim.AdamW's hyperparameters

/// Adam (Kingma & Ba, 2015), torch.optim.Adam: per-parameter state "exp_avg", "exp_avg_sq"
/// (and "max_exp_avg_sq" with amsgrad) and "step".
class Adam : public Optimizer {
 public:
  /// ValueError on lr < 0, eps < 0, weight_decay < 0 or a beta outside [0, 1).
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  const char* name() const override { return decoupled_ ? "AdamW" : "Adam"; }

 protected:
  /// For AdamW: `decoupled` decays the weights instead of adding L2 to the gradient.
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled);
  void step_group(const ParamGroup& group, const Batch& batch) override;
  void check_options(const GroupOptions& options) const override;

 private:
  bool decoupled_;
};

/// AdamW (Loshchilov & Hutter, 2019), torch.optim.AdamW: Adam with weight decay applied to the
/// weights, lr * weight_decay * w, apart from the gradient.
class AdamW final : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});  ///< ValueError as Adam's.
};

/// LAMB's hyperparameters (apex's FusedLAMB defaults).
struct LAMBOptions {
  double lr = 1e-3;  ///< learning rate
  /// decay rates of the first and second moment averages @{
  double beta1 = 0.9, beta2 = 0.999;
  /// @}
  double eps = 1e-6;            ///< added to the denominator's square root
  double weight_decay = 1e-2;   ///< decoupled, added to the update before the trust ratio
  GroupOptions to_map() const;  ///< The options as a param group's map.
  static LAMBOptions from(const GroupOptions& o);  ///< The options a param group's map holds.
};

/// LAMB (You et al., 2020): Adam's update, scaled per parameter by the trust ratio
/// ||w|| / ||update||, for large batches.
class LAMB final : public Optimizer {
 public:
  LAMB(std::vector<Tensor> params, LAMBOptions options = {});  ///< ValueError as Adam's.
  const char* name() const override { return "LAMB"; }
  bool is_elementwise() const override { return false; }  ///< the trust ratio: whole-parameter norms

 protected:
  void step_group(const ParamGroup& group, const Batch& batch) override;
  void check_options(const GroupOptions& options) const override;
};

}  // namespace ember::optim

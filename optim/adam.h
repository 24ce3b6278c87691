// Adam (optionally AMSGrad) with L2 weight decay, AdamW with decoupled weight decay, and LAMB
// (layer-wise trust ratio over Adam's update).
#pragma once

#include "optim/optimizer.h"

namespace ember::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2, added to the gradient; AdamW: decoupled
  bool amsgrad = false;
  GroupOptions to_map() const;
  static AdamOptions from(const GroupOptions& o);
};

// AdamW's defaults differ from Adam's only in weight_decay = 1e-2.
inline AdamOptions adamw_defaults() {
  AdamOptions o;
  o.weight_decay = 1e-2;
  return o;
}

class Adam : public Optimizer {
 public:
  // ValueError on lr < 0, eps < 0, weight_decay < 0 or a beta outside [0, 1).
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  const char* name() const override { return decoupled_ ? "AdamW" : "Adam"; }

 protected:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled);
  void step_group(const ParamGroup& group, const Batch& batch) override;

 private:
  bool decoupled_;
};

class AdamW final : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options = adamw_defaults());
};

struct LAMBOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0;
  GroupOptions to_map() const;
  static LAMBOptions from(const GroupOptions& o);
};

class LAMB final : public Optimizer {
 public:
  LAMB(std::vector<Tensor> params, LAMBOptions options = {});
  const char* name() const override { return "LAMB"; }
  bool is_elementwise() const override { return false; }  // the trust ratio: whole-parameter norms

 protected:
  void step_group(const ParamGroup& group, const Batch& batch) override;
};

}  // namespace ember::optim

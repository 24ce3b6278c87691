#include "optim/adam.h"

#include <cmath>

#include "optim/primitives/steps.h"
#include "tensor/decimal.h"
#include "tensor/error.h"

namespace ember::optim {

template <class D>
GroupOptions AdamFamilyOptions<D>::to_map() const {
  return {{"lr", lr}, {"beta1", beta1}, {"beta2", beta2}, {"eps", eps}, {"weight_decay", weight_decay},
          {"amsgrad", amsgrad ? 1.0 : 0.0}};
}

template <class D>
AdamFamilyOptions<D> AdamFamilyOptions<D>::from(const GroupOptions& o) {
  AdamFamilyOptions a;
  a.lr = o.at("lr");
  a.beta1 = o.at("beta1");
  a.beta2 = o.at("beta2");
  a.eps = o.at("eps");
  a.weight_decay = o.at("weight_decay");
  a.amsgrad = o.at("amsgrad") != 0;
  return a;
}

template struct AdamFamilyOptions<AdamDefaults>;
template struct AdamFamilyOptions<AdamWDefaults>;

GroupOptions LAMBOptions::to_map() const {
  return {{"lr", lr}, {"beta1", beta1}, {"beta2", beta2}, {"eps", eps}, {"weight_decay", weight_decay}};
}

LAMBOptions LAMBOptions::from(const GroupOptions& o) {
  LAMBOptions a;
  a.lr = o.at("lr");
  a.beta1 = o.at("beta1");
  a.beta2 = o.at("beta2");
  a.eps = o.at("eps");
  a.weight_decay = o.at("weight_decay");
  return a;
}

namespace {

void check(const char* who, double lr, double b1, double b2, double eps, double wd) {
  const std::string w(who);
  // Written !(x >= 0) so that NaN is refused too; infinity is no rate either.
  if (!(lr >= 0 && lr < HUGE_VAL)) throw ValueError(w + ": invalid lr " + decimal_text(lr));
  if (!(eps >= 0 && eps < HUGE_VAL)) throw ValueError(w + ": invalid eps " + decimal_text(eps));
  if (!(b1 >= 0 && b1 < 1)) throw ValueError(w + ": invalid beta1 " + decimal_text(b1) + " (need 0 <= beta1 < 1)");
  if (!(b2 >= 0 && b2 < 1)) throw ValueError(w + ": invalid beta2 " + decimal_text(b2) + " (need 0 <= beta2 < 1)");
  if (!(wd >= 0 && wd < HUGE_VAL)) throw ValueError(w + ": invalid weight_decay " + decimal_text(wd));
}

}  // namespace

void Adam::check_options(const GroupOptions& options) const {
  const AdamOptions o = AdamOptions::from(options);
  if (const double a = options.at("amsgrad"); a != 0 && a != 1)
    throw ValueError(std::string(name()) + ": invalid amsgrad " + decimal_text(a) + " (0 or 1)");
  check(name(), o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
}

void LAMB::check_options(const GroupOptions& options) const {
  const LAMBOptions o = LAMBOptions::from(options);
  check("LAMB", o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions o, bool decoupled)
    : Optimizer(o.to_map()), decoupled_(decoupled) {
  add_param_group(std::move(params));  // checks the options first
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Adam(std::move(params), AdamOptions::from(options.to_map()), true) {}

// The formulas (PyTorch's _single_tensor_adam, with AdamW's decoupled decay) are in optim/step_math.h.
void Adam::step_group(const ParamGroup& group, const Batch& batch) {
  const AdamOptions o = AdamOptions::from(group.options);
  std::vector<std::string> keys = {"exp_avg", "exp_avg_sq"};
  if (o.amsgrad) keys.push_back("max_exp_avg_sq");
  std::vector<Tensor> updated = step_operands(batch, keys);
  AdamStep prim(StepLayout{static_cast<int64_t>(batch.params.size()), batch.has_found_inf, batch.has_grad_scale},
                AdamStepParams{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, decoupled_});
  run_update(prim, batch.inputs, updated);
}

LAMB::LAMB(std::vector<Tensor> params, LAMBOptions o) : Optimizer(o.to_map()) {
  add_param_group(std::move(params));  // checks the options first
}

// The formulas (You et al. 2019, arXiv:1904.00962, Algorithm 2) are in optim/step_math.h.
void LAMB::step_group(const ParamGroup& group, const Batch& batch) {
  const LAMBOptions o = LAMBOptions::from(group.options);
  std::vector<Tensor> updated = step_operands(batch, {"exp_avg", "exp_avg_sq"});
  LAMBStep prim(StepLayout{static_cast<int64_t>(batch.params.size()), batch.has_found_inf, batch.has_grad_scale},
                LAMBStepParams{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay});
  run_update(prim, batch.inputs, updated);
}

}  // namespace ember::optim

#include "optim/amp/grad_scaler.h"

#include <cmath>
#include <limits>
#include <string>

#include "autograd/grad_mode.h"
#include "optim/amp/primitives.h"
#include "tensor/decimal.h"
#include "tensor/error.h"
#include "tensor/nvtx.h"
#include "tensor/ops.h"

namespace ember::amp {

namespace {

const Tensor& entry(const StateDict& dict, const std::string& key) {
  auto it = dict.find(key);
  if (it == dict.end()) throw ValueError("GradScaler.load_state_dict: the state has no \"" + key + "\"");
  return it->second;
}

// The scale is a float32 on the device, and its reciprocal must be one too: a normal float32.
void check_scale(const std::string& what, double scale) {
  if (!(scale >= std::numeric_limits<float>::min() && scale <= std::numeric_limits<float>::max()))
    throw ValueError(what + " must be a normal float32 number (from 2^-126 to about 3.4e38), got " + decimal_text(scale));
}

void check(const GradScalerOptions& o) {
  check_scale("GradScaler: init_scale", o.init_scale);
  if (!(o.growth_factor > 1.0))
    throw ValueError("GradScaler: growth_factor should be > 1, got " + std::to_string(o.growth_factor));
  if (!(o.backoff_factor > 0.0 && o.backoff_factor < 1.0))
    throw ValueError("GradScaler: backoff_factor should be in (0, 1), got " + std::to_string(o.backoff_factor));
  if (o.growth_interval < 1)
    throw ValueError("GradScaler: growth_interval should be a positive integer, got " +
                     std::to_string(o.growth_interval));
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) { check(options_); }

void GradScaler::place_state(Device device) {
  NoGradGuard no_grad;
  if (!scale_.defined()) {
    scale_ = full({}, options_.init_scale, TensorOptions(DType::f32).with_device(device));
    growth_tracker_ = zeros({}, TensorOptions(DType::i32).with_device(device));
  } else if (!(scale_.device() == device)) {  // a state loaded before the first loss
    scale_ = scale_.to(device);
    growth_tracker_ = growth_tracker_.to(device);
  }
}

Tensor GradScaler::scale(const Tensor& loss) {
  if (!options_.enabled) return loss;
  place_state(loss.device());
  return mul(loss, scale_);
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  const nvtx::Range range("GradScaler.unscale_");
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::unscaled)
    throw StateError("GradScaler.unscale_: already called on this optimizer since the last update()");
  if (state.stage == Stage::stepped) throw StateError("GradScaler.unscale_: called after step()");
  if (!scale_.defined())
    throw StateError("GradScaler.unscale_: no loss was scaled yet (call scale(loss) and backward first)");
  NoGradGuard no_grad;
  const std::vector<Tensor> inv_scale = {reciprocal(scale_.to(DType::f64)).to(DType::f32)};  // as PyTorch, in double
  std::vector<Tensor> updated = {zeros({}, TensorOptions(DType::f32).with_device(scale_.device()))};
  int64_t index = 0;
  for (const auto& group : optimizer.param_groups())
    for (const Tensor& p : group.params) {
      const Tensor g = p.grad();
      if (g.defined()) {
        if (g.dtype() == DType::f16)
          throw DTypeError("GradScaler.unscale_: attempting to unscale float16 gradients (parameter " +
                           std::to_string(index) + ", shape " + to_string(g.shape()) +
                           "): keep float32 parameters (autocast) or use MasterWeightOptimizer");
        if (!g.is_contiguous())
          throw ValueError("GradScaler.unscale_: the gradient of parameter " + std::to_string(index) +
                           " is not contiguous");
        updated.push_back(g);
      }
      ++index;
    }
  AmpUnscale unscale;
  run_update(unscale, inv_scale, updated);
  state.found_inf = updated[0];
  state.stage = Stage::unscaled;
}

void GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return;
  }
  const nvtx::Range range("GradScaler.step");
  if (per_optimizer_[&optimizer].stage == Stage::stepped)
    throw StateError("GradScaler.step: already called on this optimizer since the last update()");
  if (per_optimizer_[&optimizer].stage == Stage::ready) unscale_(optimizer);
  PerOptimizer& state = per_optimizer_[&optimizer];
  optimizer.step(optim::StepInputs{state.found_inf, Tensor()});
  state.stage = Stage::stepped;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  if (!scale_.defined()) throw StateError("GradScaler.update: no loss was scaled yet");
  const nvtx::Range range("GradScaler.update");
  NoGradGuard no_grad;
  if (new_scale) {
    check_scale("GradScaler.update: new_scale", *new_scale);
    fill_(scale_, *new_scale);
  } else {
    Tensor found;
    for (const auto& [opt, state] : per_optimizer_)
      if (state.found_inf.defined()) found = found.defined() ? add(found, state.found_inf) : state.found_inf;
    if (!found.defined())
      throw StateError("GradScaler.update: no inf checks were recorded (call unscale_ or step before update)");
    GradScaleUpdate rule({options_.growth_factor, options_.backoff_factor, options_.growth_interval});
    std::vector<Tensor> updated = {scale_, growth_tracker_};
    run_update(rule, {found}, updated);
  }
  per_optimizer_.clear();
}

Tensor GradScaler::found_inf(const optim::Optimizer& optimizer) const {
  auto it = per_optimizer_.find(&optimizer);
  return it == per_optimizer_.end() ? Tensor() : it->second.found_inf;
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? scale_.item<double>() : options_.init_scale;
}

StateDict GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  NoGradGuard no_grad;
  return {
      {"scale", scalar_tensor(get_scale(), DType::f32)},
      {"growth_factor", scalar_tensor(options_.growth_factor, DType::f64)},
      {"backoff_factor", scalar_tensor(options_.backoff_factor, DType::f64)},
      {"growth_interval", scalar_tensor(options_.growth_interval, DType::i64)},
      {"_growth_tracker", growth_tracker_.defined() ? growth_tracker_.to(kCPU).clone() : zeros({}, DType::i32)},
  };
}

void GradScaler::load_state_dict(const StateDict& dict) {
  if (!options_.enabled) throw StateError("GradScaler.load_state_dict: the scaler is disabled");
  GradScalerOptions o = options_;
  o.init_scale = entry(dict, "scale").item<double>();
  o.growth_factor = entry(dict, "growth_factor").item<double>();
  o.backoff_factor = entry(dict, "backoff_factor").item<double>();
  o.growth_interval = entry(dict, "growth_interval").item<int64_t>();
  const int64_t tracker = entry(dict, "_growth_tracker").item<int64_t>();
  check(o);
  if (tracker < 0 || tracker >= o.growth_interval)
    throw ValueError("GradScaler.load_state_dict: _growth_tracker " + std::to_string(tracker) +
                     " is outside [0, growth_interval = " + std::to_string(o.growth_interval) + ")");
  options_ = o;
  NoGradGuard no_grad;
  const Device device = scale_.defined() ? scale_.device() : kCPU;
  scale_ = Tensor();
  place_state(device);
  fill_(growth_tracker_, tracker);
  per_optimizer_.clear();
}

}  // namespace ember::amp

#include "optim/amp/loss_scaler.h"

#include <string>

#include "autograd/grad_mode.h"
#include "optim/amp/primitives.h"
#include "tensor/capture.h"
#include "tensor/error.h"
#include "tensor/nvtx.h"
#include "tensor/ops.h"

namespace ember::amp {

namespace {

std::string num(double v) { return std::to_string(v); }

double initial_scale(const DynamicLossScalerOptions& o) {
  return o.loss_scale > 0 ? o.loss_scale : std::ldexp(1.0, o.initial_scale_power);
}

const Tensor& entry(const StateDict& dict, const std::string& key) {
  auto it = dict.find(key);
  if (it == dict.end()) throw ValueError("DynamicLossScaler.load_state_dict: the state has no \"" + key + "\"");
  return it->second;
}

}  // namespace

DynamicLossScaler::DynamicLossScaler(DynamicLossScalerOptions options) : options_(options) {
  const auto& o = options_;
  if (o.loss_scale < 0) throw ValueError("DynamicLossScaler: loss_scale must be >= 0 (0 = dynamic), got " + num(o.loss_scale));
  if (o.loss_scale_window < 1)
    throw ValueError("DynamicLossScaler: loss_scale_window must be >= 1, got " + std::to_string(o.loss_scale_window));
  if (o.hysteresis < 1) throw ValueError("DynamicLossScaler: hysteresis must be >= 1, got " + std::to_string(o.hysteresis));
  if (!(o.min_loss_scale > 0) || !(o.max_loss_scale >= o.min_loss_scale))
    throw ValueError("DynamicLossScaler: need 0 < min_loss_scale <= max_loss_scale, got " + num(o.min_loss_scale) +
                     " and " + num(o.max_loss_scale));
  const double start = initial_scale(o);
  if (is_dynamic() && (start < o.min_loss_scale || start > o.max_loss_scale))
    throw ValueError("DynamicLossScaler: the initial scale 2^" + std::to_string(o.initial_scale_power) + " = " +
                     num(start) + " is outside [min_loss_scale, max_loss_scale] = [" + num(o.min_loss_scale) + ", " +
                     num(o.max_loss_scale) + "]");
}

void DynamicLossScaler::place_state(Device device) {
  NoGradGuard no_grad;
  if (!scale_.defined()) {
    scale_ = full({}, initial_scale(options_), TensorOptions(DType::f32).with_device(device));
    counters_ = from_vector<int64_t>({0, -1, options_.hysteresis}, {3}).to(device);
  } else if (!(scale_.device() == device)) {
    scale_ = scale_.to(device);
    counters_ = counters_.to(device);
  }
}

Tensor DynamicLossScaler::scale(const Tensor& loss) {
  place_state(loss.device());
  return mul(loss, scale_);
}

void DynamicLossScaler::update(const Tensor& found_inf) {
  if (!scale_.defined()) throw StateError("DynamicLossScaler.update: no loss was scaled yet");
  const nvtx::Range range("DynamicLossScaler.update");
  NoGradGuard no_grad;
  if (options_.raise_error_at_min_scale && is_dynamic())
    capture::refuse("DynamicLossScaler.update with raise_error_at_min_scale reads found_inf on the host");
  if (options_.raise_error_at_min_scale && is_dynamic() && found_inf.item<double>() != 0 &&
      get_scale() <= options_.min_loss_scale)
    throw ValueError("DynamicLossScaler: current loss scale already at minimum (" + num(options_.min_loss_scale) +
                     "), cannot decrease the scale anymore after another overflow");
  // A static scale stays; its counters still advance so that a checkpoint says how far it went.
  const double factor = is_dynamic() ? 2.0 : 1.0;
  const LossScalerRule rule{factor, options_.loss_scale_window, options_.hysteresis, options_.consecutive_hysteresis,
                            is_dynamic() ? options_.min_loss_scale : options_.loss_scale,
                            is_dynamic() ? options_.max_loss_scale : options_.loss_scale};
  LossScaleUpdate update(rule);
  std::vector<Tensor> updated = {scale_, counters_};
  run_update(update, {found_inf.to(scale_.device())}, updated);
}

double DynamicLossScaler::get_scale() const {
  return scale_.defined() ? scale_.item<double>() : initial_scale(options_);
}

StateDict DynamicLossScaler::state_dict() const {
  NoGradGuard no_grad;
  const std::vector<int64_t> c =
      counters_.defined() ? counters_.to_vector<int64_t>() : std::vector<int64_t>{0, -1, options_.hysteresis};
  return {{"cur_scale", scalar_tensor(get_scale(), DType::f32)},
          {"cur_iter", scalar_tensor(c[0], DType::i64)},
          {"last_overflow_iter", scalar_tensor(c[1], DType::i64)},
          {"cur_hysteresis", scalar_tensor(c[2], DType::i64)}};
}

void DynamicLossScaler::load_state_dict(const StateDict& dict) {
  const double scale = entry(dict, "cur_scale").item<double>();
  const int64_t iter = entry(dict, "cur_iter").item<int64_t>();
  const int64_t last = entry(dict, "last_overflow_iter").item<int64_t>();
  const int64_t hysteresis = entry(dict, "cur_hysteresis").item<int64_t>();
  if (!(scale > 0) || iter < 0 || last < -1 || last >= iter ||
      hysteresis < 1 || hysteresis > options_.hysteresis)
    throw ValueError("DynamicLossScaler.load_state_dict: inconsistent state (cur_scale " + num(scale) + ", cur_iter " +
                     std::to_string(iter) + ", last_overflow_iter " + std::to_string(last) + ", cur_hysteresis " +
                     std::to_string(hysteresis) + " with hysteresis " + std::to_string(options_.hysteresis) + ")");
  NoGradGuard no_grad;
  const Device device = scale_.defined() ? scale_.device() : kCPU;
  scale_ = full({}, scale, TensorOptions(DType::f32).with_device(device));
  counters_ = from_vector<int64_t>({iter, last, hysteresis}, {3}).to(device);
}

}  // namespace ember::amp

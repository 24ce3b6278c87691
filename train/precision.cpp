#include "train/precision.h"

#include "autograd/grad_mode.h"
#include "dist/zero_optimizer.h"
#include "nn/layers/normalization.h"
#include "optim/clip_grad.h"
#include "tensor/cuda_settings.h"
#include "tensor/error.h"
#include "tensor/ops.h"
#include "tensor/set_data.h"
#include "train/strategy.h"

namespace ember::train {

namespace {

bool is_naive(Precision p) { return p == Precision::naive_fp16 || p == Precision::naive_bf16; }

// Prefixes every key of `src` into `dst`.
void put(StateDict& dst, const std::string& prefix, const StateDict& src) {
  for (const auto& [key, value] : src) dst[prefix + key] = value;
}

// The entries of `src` under `prefix`, with the prefix taken off.
StateDict take(const StateDict& src, const std::string& prefix) {
  StateDict out;
  for (const auto& [key, value] : src)
    if (key.starts_with(prefix)) out[key.substr(prefix.size())] = value;
  return out;
}

}  // namespace

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = {"fp32",       "tf32",       "amp_fp16", "amp_bf16",
                                                 "naive_fp16", "naive_bf16", "pure_bf16"};
  return names;
}

const char* precision_name(Precision p) { return precision_names()[static_cast<size_t>(p)].c_str(); }

Precision parse_precision(const std::string& name) {
  const auto& names = precision_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Precision>(i);
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  throw ValueError("unknown precision \"" + name + "\" (expected one of " + all + ")");
}

namespace {

// What the constructor changes outside itself, put back when it throws (a bad optimizer or scaler
// option found after the cast): each parameter's and buffer's data as it was, the tensors themselves
// rather than a cast back, so nothing is rounded; and the TF32 switches.
class ModelRollback {
 public:
  explicit ModelRollback(const nn::Module& model)
      : matmul_tf32_(cuda::matmul_allow_tf32()), conv_tf32_(cuda::conv_allow_tf32()) {
    for (const std::vector<Tensor>& tensors : {model.parameters(), model.buffers()})
      for (const Tensor& t : tensors) saved_.emplace_back(t, t.detach());
  }
  void restore() {
    for (auto& [t, before] : saved_) set_data(t, before);
    cuda::set_matmul_allow_tf32(matmul_tf32_);
    cuda::set_conv_allow_tf32(conv_tf32_);
  }

 private:
  std::vector<std::pair<Tensor, Tensor>> saved_;  // (the model's tensor, its data before)
  bool matmul_tf32_, conv_tf32_;
};

}  // namespace

TrainingPrecision::TrainingPrecision(PrecisionOptions options, nn::Module& model, const OptimizerFactory& make_optimizer)
    : options_(options) {
  ModelRollback rollback(model);
  try {
    build(model, make_optimizer);
  } catch (...) {
    rollback.restore();
    throw;
  }
}

void TrainingPrecision::build(nn::Module& model, const OptimizerFactory& make_optimizer) {
  const Precision p = options_.precision;
  if (p == Precision::tf32) {
    cuda::set_matmul_allow_tf32(true);
    cuda::set_conv_allow_tf32(true);
  }
  // Apex O2's keep_batchnorm_fp32: batch norm keeps float32 parameters and statistics.
  if (is_naive(p))
    model.to(p == Precision::naive_fp16 ? DType::f16 : DType::bf16,
             [](const nn::Module& m) { return dynamic_cast<const nn::BatchNorm2d*>(&m) != nullptr; });
  if (p == Precision::pure_bf16) model.to(DType::bf16);
  if (options_.strategy && options_.zero_group)
    throw ValueError("PrecisionOptions: strategy and zero_group both set; give the ZeRO strategy one way");
  strategy_ = options_.strategy         ? options_.strategy
              : options_.zero_group ? make_zero_strategy(options_.zero_group, options_.zero)
                                    : make_strategy({}, nullptr);
  // What the optimizer (or the masters) covers: the model's parameters, or under ZeRO this rank's pieces.
  const std::vector<Tensor> params = strategy_->prepare(model);
  // ZeRO's offload_optimizer: float32 masters on the host for every mode that steps float32 state.
  const bool offload = zero() && zero()->options().offload_optimizer;
  if (offload && (p == Precision::pure_bf16 || p == Precision::amp_fp16))
    throw ValueError(std::string("ZeRO offload_optimizer: ") + precision_name(p) +
                     (p == Precision::pure_bf16 ? " keeps no float32 state to offload"
                                                : " unscales in place on the device; use naive_fp16 (DeepSpeed's fp16)"));
  if (is_naive(p) || offload) {
    masters_ = std::make_unique<amp::MasterWeightOptimizer>(params, make_optimizer, amp::MasterWeightOptions{false, 0, offload});
    optimizer_ = std::shared_ptr<optim::Optimizer>(std::shared_ptr<void>(), &masters_->inner());
    stepped_ = masters_->masters();
    if (p == Precision::naive_fp16) loss_scaler_ = std::make_unique<amp::DynamicLossScaler>(options_.loss_scaler);
  } else {
    if (p == Precision::amp_fp16) grad_scaler_ = std::make_unique<amp::GradScaler>(options_.grad_scaler);
    stepped_ = params;
    optimizer_ = make_optimizer(stepped_);
  }
  if (zero()) dist::check_shardable(*optimizer_);
}

TrainingPrecision::TrainingPrecision(std::shared_ptr<optim::Optimizer> optimizer)
    : strategy_(make_strategy({}, nullptr)), optimizer_(std::move(optimizer)) {
  if (!optimizer_) throw ValueError("TrainingPrecision: the optimizer must be set");
  for (const auto& group : optimizer_->param_groups())
    for (const Tensor& p : group.params) stepped_.push_back(p);
}

dist::ZeroPartition* TrainingPrecision::zero() const { return strategy_->zero_partition(); }

DType TrainingPrecision::input_dtype() const {
  switch (options_.precision) {
    case Precision::naive_fp16: return DType::f16;
    case Precision::naive_bf16:
    case Precision::pure_bf16: return DType::bf16;
    default: return DType::f32;
  }
}

std::unique_ptr<amp::Autocast> TrainingPrecision::autocast(Device device) const {
  if (options_.precision == Precision::amp_fp16) return std::make_unique<amp::Autocast>(device.type, DType::f16);
  if (options_.precision == Precision::amp_bf16) return std::make_unique<amp::Autocast>(device.type, DType::bf16);
  return nullptr;
}

void TrainingPrecision::zero_grad() {
  if (masters_) masters_->zero_grad();
  else optimizer_->zero_grad();
  strategy_->zero_grad();
}

Tensor TrainingPrecision::grad_norm(double clip_grad_norm) {
  const Tensor total = strategy_->total_norm(optim::total_grad_norm(stepped_));
  if (clip_grad_norm > 0) optim::clip_grads_to_norm_(stepped_, total.to(stepped_.front().device()), clip_grad_norm);
  return total;
}

void TrainingPrecision::backward(const Tensor& loss) {
  if (grad_scaler_) grad_scaler_->scale(loss).backward();
  else if (loss_scaler_) loss_scaler_->scale(loss).backward();
  else loss.backward();
}

StepOutcome TrainingPrecision::step(double clip_grad_norm) {
  StepOutcome out;
  if (grad_scaler_) {
    grad_scaler_->unscale_(*optimizer_);
    strategy_->agree_on_overflow(grad_scaler_->found_inf(*optimizer_));  // in place: the scaler's own
    out.grad_norm = grad_norm(clip_grad_norm);
    grad_scaler_->step(*optimizer_);  // a non-finite norm implies found_inf here
    strategy_->after_step();
    out.skipped = grad_scaler_->found_inf(*optimizer_);
    grad_scaler_->update();
    return out;
  }
  if (masters_) {
    Tensor inv_scale;
    if (loss_scaler_) {
      if (!loss_scaler_->scale_tensor().defined())  // made by the first scale(): the amp modes say the same
        throw StateError("TrainingPrecision.step: no loss was scaled yet (call backward(loss) first)");
      NoGradGuard no_grad;
      inv_scale = reciprocal(loss_scaler_->scale_tensor().to(DType::f64)).to(DType::f32);
    }
    out.skipped = strategy_->agree_on_overflow(masters_->unscale_grads(inv_scale));
    out.grad_norm = grad_norm(clip_grad_norm);
    masters_->step(out.skipped);
    strategy_->after_step();
    if (loss_scaler_) loss_scaler_->update(out.skipped);
    return out;
  }
  out.grad_norm = grad_norm(clip_grad_norm);  // the same on every rank under ZeRO: so is the decision
  NoGradGuard no_grad;
  out.skipped = logical_not(optim::is_finite(out.grad_norm)).to(DType::f32);
  optimizer_->step(optim::StepInputs{out.skipped, Tensor()});
  strategy_->after_step();
  return out;
}

StepOutcome TrainingPrecision::backward_and_step(const Tensor& loss, double clip_grad_norm) {
  backward(loss);
  return step(clip_grad_norm);
}

Tensor TrainingPrecision::loss_scale() const {
  if (grad_scaler_ && grad_scaler_->scale_tensor().defined()) return grad_scaler_->scale_tensor();
  if (loss_scaler_ && loss_scaler_->scale_tensor().defined()) return loss_scaler_->scale_tensor();
  const double scale = grad_scaler_ ? grad_scaler_->get_scale() : loss_scaler_ ? loss_scaler_->get_scale() : 1.0;
  return scalar_tensor(scale, DType::f32);
}

StateDict TrainingPrecision::state_dict() const {
  StateDict dict;
  if (grad_scaler_) put(dict, "grad_scaler.", grad_scaler_->state_dict());
  if (loss_scaler_) put(dict, "loss_scaler.", loss_scaler_->state_dict());
  if (masters_)
    for (const auto& [key, value] : masters_->state_dict())
      if (!key.starts_with("optimizer.")) dict[key] = value;  // the Runner saves the optimizer itself
  return dict;
}

void TrainingPrecision::load_state_dict(const StateDict& dict) {
  const StateDict expected = state_dict();
  for (const auto& [key, value] : expected)
    if (!dict.count(key))
      throw ValueError(std::string("TrainingPrecision: the state lacks \"") + key + "\" (precision " +
                       precision_name(options_.precision) + ")");
  for (const auto& [key, value] : dict)
    if (!expected.count(key))
      throw ValueError(std::string("TrainingPrecision: unexpected \"") + key + "\" for precision " +
                       precision_name(options_.precision));
  if (grad_scaler_) grad_scaler_->load_state_dict(take(dict, "grad_scaler."));
  if (loss_scaler_) loss_scaler_->load_state_dict(take(dict, "loss_scaler."));
  if (masters_) {
    StateDict with_optimizer = dict;
    put(with_optimizer, "optimizer.", optimizer_->state_dict());  // the optimizer is restored by the Runner
    masters_->load_state_dict(with_optimizer);
  }
}

}  // namespace ember::train

/// @file
/// The training precision modes users pick by name (`docs/design.md#precision-modes`; their rules
/// in docs/reference.md, from Autocast to Dynamic loss scaling): what each casts, autocasts,
/// scales and keeps in float32, and one iteration's backward, unscale, clipping and step, all
/// decided on the device (no host synchronisation).
///   fp32        float32 everywhere
///   tf32        float32 storage, TF32 tensor-core matmul and conv on a GPU (no effect on the CPU)
///   amp_fp16    torch-style AMP: autocast to f16 + GradScaler (PyTorch's defaults)
///   amp_bf16    autocast to bf16, no loss scaling
///   naive_fp16  Apex O2 / Colossal-AI fp16_naive: f16 model (batch norm kept f32), f32 master
///               weights, DynamicLossScaler
///   naive_bf16  the same in bf16, without loss scaling
///   pure_bf16   the whole model and the optimizer in bf16, no masters, no scaling
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/zero_partition.h"
#include "nn/module.h"
#include "optim/amp/grad_scaler.h"
#include "optim/amp/loss_scaler.h"
#include "optim/amp/master_weights.h"
#include "optim/optimizer.h"
#include "tensor/autocast.h"

namespace ember::train {

class Strategy;

/// The training precision modes (see the file's description).
enum class Precision { fp32, tf32, amp_fp16, amp_bf16, naive_fp16, naive_bf16, pure_bf16 };

const std::vector<std::string>& precision_names();  ///< in the order above
const char* precision_name(Precision p);            ///< The mode's name: "fp32", "amp_fp16", ...
/// The mode named `name`; ValueError listing the names for an unknown one.
Precision parse_precision(const std::string& name);

/// A precision mode and its settings.
struct PrecisionOptions {
  Precision precision = Precision::fp32;      ///< the mode
  amp::GradScalerOptions grad_scaler;         ///< amp_fp16
  amp::DynamicLossScalerOptions loss_scaler;  ///< naive_fp16 (its defaults are Colossal-AI's)
  /// How the ranks share the training (train/strategy.h; null: one process). Under ZeRO the
  /// optimizer, and in the naive modes the float32 masters, cover this rank's shard only; overflow
  /// and the gradient norm are agreed over the ranks, so every rank skips or steps together and
  /// clips by the global norm.
  std::shared_ptr<Strategy> strategy;
  /// Short for a ZeRO strategy over this group with `zero` (make_zero_strategy); not with `strategy`.
  std::shared_ptr<dist::ProcessGroup> zero_group;
  dist::ZeroOptions zero;  ///< the ZeRO settings, with zero_group
};

/// Builds the optimizer over the tensors it is to step.
using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor> params)>;

/// What one iteration's backward and step leave on the device.
struct StepOutcome {
  Tensor grad_norm;  ///< 0-dim float32: the 2-norm of the unscaled gradients, before clipping
  Tensor skipped;    ///< 0-dim float32: 1 when the step was skipped (overflow or a non-finite norm)
};

/// What a precision mode does to one training step (see the file's description): casts the model,
/// owns the optimizer and the scaler, and runs backward_and_step.
class TrainingPrecision {
 public:
  /// Casts `model` (already on its device) as the mode asks and builds the optimizer over what it
  /// steps: the float32 masters in the naive modes, the model's parameters otherwise (under ZeRO:
  /// of this rank's pieces). tf32 turns on ember::cuda's matmul and conv TF32 switches for the process.
  /// When it throws (a bad optimizer or scaler option), the model's tensors and the switches are as
  /// they were.
  TrainingPrecision(PrecisionOptions options, nn::Module& model, const OptimizerFactory& make_optimizer);
  /// fp32 over an optimizer built already (the model stays as it is).
  explicit TrainingPrecision(std::shared_ptr<optim::Optimizer> optimizer);

  Precision precision() const { return options_.precision; }  ///< The mode.
  /// The optimizer schedulers drive (in the naive modes, the one over the masters).
  optim::Optimizer& optimizer() { return *optimizer_; }
  const optim::Optimizer& optimizer() const { return *optimizer_; }  ///< The optimizer schedulers drive.
  /// The dtype the model takes its input in: f16/bf16 in the naive and pure modes, else float32.
  DType input_dtype() const;
  /// The autocast region of the forward and the loss in the amp modes, null otherwise.
  std::unique_ptr<amp::Autocast> autocast(Device device) const;

  /// Sets the gradients of the stepped tensors to none.
  void zero_grad();
  /// Runs backward of `loss` (scaled where the mode scales), the unscale and overflow check, the norm
  /// (gradients clipped to clip_grad_norm when > 0), the step (skipped on the device on an overflow
  /// or a non-finite norm) and the loss-scale update: backward(loss), then step(clip_grad_norm).
  StepOutcome backward_and_step(const Tensor& loss, double clip_grad_norm);
  /// Gradient accumulation, a step in parts: backward of one micro-batch's `loss` (scaled where the
  /// mode scales; the loss scale stays the same until step()), its gradients added to the earlier ones.
  void backward(const Tensor& loss);
  /// The rest of the step over the gradients the backwards since zero_grad() added up: the unscale
  /// and overflow check (once for them all), the norm and clipping, the step and the scale update.
  StepOutcome step(double clip_grad_norm);
  /// Whether the loss is scaled (amp_fp16 with its scaler enabled, naive_fp16).
  bool scales_loss() const { return (grad_scaler_ && grad_scaler_->is_enabled()) || loss_scaler_; }
  /// The current loss scale (0-dim float32 on the device); 1 in the modes that do not scale.
  Tensor loss_scale() const;

  /// The ZeRO partition of the model, or null.
  dist::ZeroPartition* zero() const;
  /// The strategy the mode steps under (PrecisionOptions::strategy, or one it made: ZeRO over
  /// zero_group, else none).
  const std::shared_ptr<Strategy>& strategy() const { return strategy_; }

  /// The scaler's state ("grad_scaler.<key>" or "loss_scaler.<key>") and the masters' own
  /// ("master.<i>", ...); empty in fp32, tf32, amp_bf16 and pure_bf16.
  StateDict state_dict() const;
  /// ValueError when the dict does not fit this mode (a missing key, a master of another shape).
  void load_state_dict(const StateDict& dict);

 private:
  // The constructor's work: casts the model, makes the strategy, the masters, the optimizer and the scaler.
  void build(nn::Module& model, const OptimizerFactory& make_optimizer);
  // The gradient norm of the stepped tensors (over every rank under ZeRO), clipped to clip_grad_norm when > 0.
  Tensor grad_norm(double clip_grad_norm);

  PrecisionOptions options_;
  std::shared_ptr<Strategy> strategy_;
  std::shared_ptr<optim::Optimizer> optimizer_;  // in the naive modes a view of masters_->inner()
  std::unique_ptr<amp::MasterWeightOptimizer> masters_;
  std::unique_ptr<amp::GradScaler> grad_scaler_;
  std::unique_ptr<amp::DynamicLossScaler> loss_scaler_;
  std::vector<Tensor> stepped_;  // the tensors the optimizer steps (masters, or the parameters)
};

}  // namespace ember::train

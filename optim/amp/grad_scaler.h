/// @file
/// amp::GradScaler: PyTorch's torch.amp.GradScaler (`docs/reference.md#gradscaler`) with its defaults and rules.
/// The scale, the growth tracker and found_inf live on the loss's device and are updated there, so
/// scale -> backward -> unscale_ -> clip -> step -> update makes no host synchronisation.
#pragma once

#include <map>
#include <optional>

#include "optim/optimizer.h"
#include "tensor/state_dict.h"
#include "tensor/tensor.h"

namespace ember::amp {

/// GradScaler's settings, with PyTorch's defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;     ///< 2^16
  double growth_factor = 2.0;      ///< > 1
  double backoff_factor = 0.5;     ///< in (0, 1)
  int64_t growth_interval = 2000;  ///< clean steps in a row before the scale grows
  bool enabled = true;             ///< false: every call passes through (scale(loss) is loss)
};

/// Loss scaling for mixed precision (torch.amp.GradScaler): the loss is multiplied by the scale so
/// that small f16 gradients do not flush to zero, the gradients divided by it before the step, and a
/// step whose gradients overflowed skipped, the scale backing off; after growth_interval clean steps
/// it grows. Loop: scale(loss).backward(); unscale_(opt) (optional, to clip); step(opt); update().
class GradScaler {
 public:
  /// ValueError on growth_factor <= 1, backoff_factor outside (0, 1), growth_interval < 1 or a
  /// non-positive init_scale.
  explicit GradScaler(GradScalerOptions options = {});

  /// loss * scale; the scale is created on the loss's device at the first call. A 16-bit loss is
  /// scaled in f32 and rounded once, but its own gradient is the scale, which from 65520 on is inf
  /// in f16: scale an f32 loss (the Runner computes it from f32 logits).
  Tensor scale(const Tensor& loss);
  /// Divides the optimizer's gradients by the scale and records whether any was not finite, in
  /// one multi-tensor kernel. StateError on a second call before update(), or after step();
  /// DTypeError on float16 gradients (the parameters an optimizer steps must be float32 or wider).
  void unscale_(optim::Optimizer& optimizer);
  /// Unscales if not done yet, then steps the optimizer unless a gradient was not finite; the
  /// decision is taken on the device (the optimizer reads found_inf). StateError on a second call
  /// before update().
  void step(optim::Optimizer& optimizer);
  /// After every optimizer's step: backs off on an overflow of any of them, grows after
  /// growth_interval clean steps; new_scale sets the scale instead.
  void update(std::optional<double> new_scale = std::nullopt);

  /// found_inf of the last unscale of this optimizer (0-dim float32 on the device; 1 = the step is
  /// skipped), undefined before one. A Runner sums it to count skipped steps without a sync.
  Tensor found_inf(const optim::Optimizer& optimizer) const;
  /// The scale as a 0-dim float32 tensor on its device (undefined before the first scale()).
  const Tensor& scale_tensor() const { return scale_; }
  /// The scale read on the host (a synchronisation on a GPU); init_scale before the first scale().
  double get_scale() const;
  bool is_enabled() const { return options_.enabled; }           ///< Whether scaling is on (options().enabled).
  const GradScalerOptions& options() const { return options_; }  ///< The settings it was built with.

  /// PyTorch's keys: "scale", "growth_factor", "backoff_factor", "growth_interval",
  /// "_growth_tracker" (0-dim tensors, host copies). Empty when disabled.
  StateDict state_dict() const;
  /// ValueError naming the key when one is missing; the hyperparameters are taken from the dict.
  void load_state_dict(const StateDict& dict);

 private:
  enum class Stage { ready, unscaled, stepped };
  struct PerOptimizer {
    Stage stage = Stage::ready;
    Tensor found_inf;
  };
  // Creates the scale and tracker on `device`, or moves them there.
  void place_state(Device device);

  GradScalerOptions options_;
  Tensor scale_;           // 0-dim float32
  Tensor growth_tracker_;  // 0-dim int32
  std::map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace ember::amp

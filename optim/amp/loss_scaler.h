/// @file
/// amp::DynamicLossScaler: the loss scaler of naive AMP, with DeepSpeed's fp16 knobs
/// (`docs/reference.md#dynamic-loss-scaling`) and Colossal-AI's max scale
/// (`docs/reference.md#master-weights`). The scale and its counters live on the device and are
/// updated there from a found_inf flag, so a step needs no host synchronisation.
#pragma once

#include <cmath>

#include "tensor/state_dict.h"
#include "tensor/tensor.h"

namespace ember::amp {

/// DynamicLossScaler's settings, under DeepSpeed's fp16 names and defaults.
struct DynamicLossScalerOptions {
  double loss_scale = 0;           ///< 0: dynamic; > 0: this static scale, never changed
  int initial_scale_power = 16;    ///< the dynamic scale starts at 2^power
  int64_t loss_scale_window = 1000;  ///< clean updates after the last overflow before the scale doubles
  int64_t hysteresis = 2;          ///< overflows tolerated before the scale backs off
  bool consecutive_hysteresis = false;  ///< refill the hysteresis after every clean step, not only when the scale grows
  double min_loss_scale = 1;  ///< the scale never backs off below this
  double max_loss_scale = 4294967296.0;  ///< 2^32, Colossal-AI's DynamicGradScaler cap
  /// Raise when an overflow meets the scale at min_loss_scale (DeepSpeed's raise_error_at_min_scale).
  /// It reads the scale and the overflow flag on the host: a synchronisation per update on a GPU,
  /// which is why it is off by default here.
  bool raise_error_at_min_scale = false;
};

/// The loss scaler of naive AMP (DeepSpeed's DynamicLossScaler): the scale halves after
/// `hysteresis` overflows and doubles after loss_scale_window clean updates; a static scale stays.
class DynamicLossScaler {
 public:
  /// ValueError on a window or hysteresis < 1, min_loss_scale <= 0, max < min, a negative static
  /// scale, or a dynamic start outside [min, max].
  explicit DynamicLossScaler(DynamicLossScalerOptions options = {});

  /// loss * scale; the state is created (or moved) on the loss's device. As GradScaler::scale, a
  /// float16 loss would take the scale (2^16 at first) as its gradient: scale an f32 loss.
  Tensor scale(const Tensor& loss);
  /// One update after a step: overflow is found_inf (0-dim float32, nonzero = the step was
  /// skipped). A static scaler only counts. With raise_error_at_min_scale: ValueError "loss scale
  /// already at minimum" when an overflow meets the floor.
  void update(const Tensor& found_inf);

  const Tensor& scale_tensor() const { return scale_; }  ///< 0-dim float32
  double get_scale() const;  ///< a host read (synchronises on a GPU)
  bool is_dynamic() const { return options_.loss_scale == 0; }          ///< Whether the scale adapts (loss_scale 0).
  const DynamicLossScalerOptions& options() const { return options_; }  ///< The settings it was built with.

  /// "cur_scale", "cur_iter", "last_overflow_iter", "cur_hysteresis" (DeepSpeed's names), host copies.
  StateDict state_dict() const;
  /// ValueError naming a missing key or a counter out of range.
  void load_state_dict(const StateDict& dict);

 private:
  void place_state(Device device);

  DynamicLossScalerOptions options_;
  Tensor scale_;     // 0-dim float32
  Tensor counters_;  // int64 (iteration, last_overflow_iter, hysteresis_left)
};

}  // namespace ember::amp

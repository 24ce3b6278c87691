// The kernels of loss scaling as primitives that update tensors in place (run_update: `in` is read,
// `out` written) and never read a value on the host: the unscale + non-finite check over all
// gradients, the non-finite check alone, and the two scale updates. CPU kernels in cpu/amp.cpp, CUDA
// kernels in cuda/amp.{cpp,cu}.
#pragma once

#include "optim/amp/scale_rules.h"
#include "tensor/primitive.h"

namespace ember {

// in {inv_scale}, out {found_inf, grad...}: inv_scale and found_inf 0-dim float32, every grad a
// contiguous floating tensor on their device. Multiplies every gradient element by inv_scale and
// sets found_inf to 1 when any element was not finite (PyTorch's
// _amp_foreach_non_finite_check_and_unscale_).
class AmpUnscale final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  const char* name() const override { return "amp_unscale"; }
  EMBER_PRIMITIVE_KERNELS;
};

// in {x...}, out {first (0-dim i32)}: every x a contiguous floating tensor on first's device. Sets
// first = min(first, slot) when any element read is not finite, so that over checks numbered in the
// order they run, first ends as the number of the first check that saw a NaN or an infinity.
class FirstNonFinite final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  explicit FirstNonFinite(int32_t slot) : slot_(slot) {}
  const char* name() const override { return "first_nonfinite"; }
  int32_t slot() const { return slot_; }
  EMBER_PRIMITIVE_KERNELS;

 private:
  int32_t slot_;
};

// in {found_inf (0-dim f32)}, out {scale (0-dim f32), growth_tracker (0-dim i32)}: GradScaler's update.
class GradScaleUpdate final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  explicit GradScaleUpdate(amp::GradScalerRule rule) : rule_(rule) {}
  const char* name() const override { return "amp_update_scale"; }
  const amp::GradScalerRule& rule() const { return rule_; }
  EMBER_PRIMITIVE_KERNELS;

 private:
  amp::GradScalerRule rule_;
};

// in {found_inf (0-dim f32)}, out {scale (0-dim f32), counters (3 i64: LossScalerCounters' fields in
// order)}: the dynamic loss scaler's update.
class LossScaleUpdate final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  explicit LossScaleUpdate(amp::LossScalerRule rule) : rule_(rule) {}
  const char* name() const override { return "amp_update_loss_scale"; }
  const amp::LossScalerRule& rule() const { return rule_; }
  EMBER_PRIMITIVE_KERNELS;

 private:
  amp::LossScalerRule rule_;
};

// in {found_inf (0-dim f32), master...(f32)}, out {param...(f16/bf16, each its master's shape)}:
// naive AMP's copy-back of the stepped masters into the model, in one multi-tensor pass, skipped on
// the device when found_inf is set.
class MasterCopyBack final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  explicit MasterCopyBack(amp::CopyBackRule rule) : rule_(rule) {}
  const char* name() const override { return "master_copy_back"; }
  EMBER_PRIMITIVE_KERNELS;

 private:
  amp::CopyBackRule rule_;
};

}  // namespace ember

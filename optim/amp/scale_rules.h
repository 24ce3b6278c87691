// The unscale of one gradient element, the finiteness test, the copy-back of one master weight and
// the loss-scale update rules, as plain functions that the CPU kernels and the CUDA kernels share, so
// that both backends follow one definition.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "optim/step_math.h"
#include "tensor/philox.h"
#include "tensor/convert.h"

namespace ember::amp {

template <class C>
EMBER_HD inline bool is_finite(C v) {
#if defined(__CUDA_ARCH__)
  return isfinite(v);
#else
  return std::isfinite(v);
#endif
}

// The exponent field of a floating format: all ones exactly in NaN and the infinities (IEEE 754).
// Testing it needs no conversion to float, so a CPU loop over f16 or bf16 vectorizes.
template <class B, B kOnes>
struct ExponentBits {
  using Bits = B;  // an unsigned integer as wide as the format
  static constexpr Bits kAllOnes = kOnes;
};
template <class T> struct ExponentField;
template <> struct ExponentField<float> : ExponentBits<uint32_t, 0x7f800000u> {};
template <> struct ExponentField<double> : ExponentBits<uint64_t, 0x7ff0000000000000ull> {};
template <> struct ExponentField<f16> : ExponentBits<uint16_t, 0x7c00u> {};
template <> struct ExponentField<bf16> : ExponentBits<uint16_t, 0x7f80u> {};

// x's exponent field; ExponentField<T>::kAllOnes when x is NaN or infinite.
template <class T>
EMBER_HD inline typename ExponentField<T>::Bits exponent_field(const T& x) {
  typename ExponentField<T>::Bits bits;
  memcpy(&bits, &x, sizeof(bits));
  return bits & ExponentField<T>::kAllOnes;
}

// g[i] *= inv_scale, in float (double for f64); true when the value read was not finite.
template <class T>
EMBER_HD inline bool unscale_element(T* g, optim::step_compute_t<T> inv_scale, int64_t i) {
  const auto v = convert<optim::step_compute_t<T>>(g[i]);
  g[i] = convert<T>(v * inv_scale);
  return !is_finite(v);
}

// How a master weight goes back into its f16/bf16 parameter: rounded to nearest, or (bf16 only)
// stochastically: uniform 16-bit noise added below the bits bf16 keeps, then truncated, so that the
// expected value is the master's (Gupta et al., "Deep Learning with Limited Numerical Precision",
// ICML 2015). The noise of element `index` of a copy-back is Philox(seed, step) word index % 4 of
// block (step << 40) + index / 4: the same on both backends, and new each step.
struct CopyBackRule {
  bool stochastic;
  uint64_t seed, step;
};

template <class T>
EMBER_HD inline void copy_back_element(const float* master, T* param, int64_t i, int64_t index, const CopyBackRule& r) {
  const float m = master[i];
  if constexpr (std::is_same_v<T, bf16>) {
    const uint32_t bits = ember::detail::float_bits(m);
    if (r.stochastic && (bits & 0x7f800000u) != 0x7f800000u) {  // finite: inf and NaN round as usual
      const uint64_t counter = (r.step << 40) + static_cast<uint64_t>(index) / 4;
      const uint32_t noise = philox::generate(r.seed, counter).word(static_cast<int>(index % 4)) & 0xffffu;
      param[i].bits = static_cast<uint16_t>((bits + noise) >> 16);
      return;
    }
  }
  param[i] = convert<T>(m);
}

struct GradScalerRule {
  double growth_factor;
  double backoff_factor;
  int64_t growth_interval;
};

// PyTorch's GradScaler.update (aten/src/ATen/native/cuda/AmpKernels.cu, docs/reference.md#gradscaler): back off
// and restart the count on an overflow; grow after growth_interval clean steps in a row, keeping
// the old scale when the grown one would not be finite.
EMBER_HD inline void update_grad_scale(float& scale, int32_t& growth_tracker, bool found_inf,
                                                const GradScalerRule& rule) {
  if (found_inf) {
    scale = static_cast<float>(scale * rule.backoff_factor);
    growth_tracker = 0;
    return;
  }
  const int32_t successful = growth_tracker + 1;
  if (successful == rule.growth_interval) {
    const float grown = static_cast<float>(scale * rule.growth_factor);
    if (is_finite(grown)) scale = grown;
    growth_tracker = 0;
  } else {
    growth_tracker = successful;
  }
}

struct LossScalerRule {
  double scale_factor;     // 2: halve on backoff, double on growth
  int64_t scale_window;    // loss_scale_window
  int64_t hysteresis;      // overflows tolerated before a backoff (DeepSpeed's delayed_shift)
  bool consecutive_hysteresis;
  double min_scale, max_scale;
};

// Counters of the dynamic loss scaler, kept beside its scale.
struct LossScalerCounters {
  int64_t iteration;           // updates so far
  int64_t last_overflow_iter;  // -1 before the first overflow
  int64_t hysteresis_left;
};

// DeepSpeed's DynamicLossScaler.update_scale (runtime/fp16/loss_scaler.py,
// docs/reference.md#dynamic-loss-scaling), with Colossal-AI's max_scale cap
// (docs/reference.md#master-weights): an overflow spends one unit of hysteresis and backs off
// (not below min_scale) when none is left; a clean step refills hysteresis when
// consecutive_hysteresis is set, and grows the scale (not above max_scale) every scale_window
// iterations after the last overflow, refilling hysteresis.
EMBER_HD inline void update_loss_scale(float& scale, LossScalerCounters& c, bool overflow,
                                                const LossScalerRule& rule) {
  if (overflow) {
    if (rule.hysteresis == 1 || c.hysteresis_left == 1) {
      scale = static_cast<float>(fmax(scale / rule.scale_factor, rule.min_scale));
    } else {
      c.hysteresis_left -= 1;
    }
    c.last_overflow_iter = c.iteration;
  } else {
    if (rule.consecutive_hysteresis) c.hysteresis_left = rule.hysteresis;
    if ((c.iteration - c.last_overflow_iter) % rule.scale_window == 0) {
      if (!rule.consecutive_hysteresis) c.hysteresis_left = rule.hysteresis;
      scale = static_cast<float>(fmin(scale * rule.scale_factor, rule.max_scale));
    }
  }
  c.iteration += 1;
}

}  // namespace ember::amp

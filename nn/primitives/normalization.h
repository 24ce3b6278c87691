// Normalization primitives: batch norm (per channel over N and the spatial dims) and layer norm
// (over the trailing dims). CPU kernels in cpu/normalization.cpp, vjps in nn/normalization.cpp.
#pragma once

#include "tensor/primitive.h"

namespace ember {

// Inputs {x (N, C, ...), [weight (C)], [bias (C)], [running_mean (C), running_var (C)] (eval only)}:
// which optional inputs are present is fixed by the flags. Training outputs {y, batch mean,
// biased batch var}, the statistics in opmath_dtype (f32 for 16-bit x); eval outputs {y} normalised
// with the running statistics. x may be contiguous or channels-last (read in place, no copy).
class BatchNorm final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  BatchNorm(bool training, bool has_weight, bool has_bias, double eps)
      : training_(training), has_weight_(has_weight), has_bias_(has_bias), eps_(eps) {}
  const char* name() const override { return "batch_norm"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  bool training_, has_weight_, has_bias_;
  double eps_;
};

// The backward kernel of BatchNorm (first order; the vjp composes public ops instead when the
// graph of the backward is recorded). Inputs {x, g (contiguous, x's shape and dtype), [weight],
// then g_mean, g_var (C) when training (the statistics outputs' cotangents) or running_mean,
// running_var when not}. Outputs {dx (x's dtype), dweight (C), dbias (C)}, the last two in opmath_dtype.
class BatchNormBackward final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  BatchNormBackward(bool training, bool has_weight, double eps)
      : training_(training), has_weight_(has_weight), eps_(eps) {}
  const char* name() const override { return "batch_norm_backward"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;

 private:
  bool training_, has_weight_;
  double eps_;
};

// Inputs {x (..., *normalized), [weight (*normalized)], [bias (*normalized)]}, x contiguous:
// y = (x - mean) / sqrt(var + eps) * weight + bias over the last `normalized_dims` dims.
class LayerNorm final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  LayerNorm(int normalized_dims, bool has_weight, bool has_bias, double eps)
      : normalized_dims_(normalized_dims), has_weight_(has_weight), has_bias_(has_bias), eps_(eps) {}
  const char* name() const override { return "layer_norm"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const { return {{in[0].shape(), in[0].dtype()}}; }
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  int normalized_dims_;
  bool has_weight_, has_bias_;
  double eps_;
};

// The backward kernel of LayerNorm (first order, as BatchNormBackward). Inputs {x, g (both
// contiguous, one shape and dtype), [weight]}; outputs {dx, dweight, dbias}, the last two of the
// normalised shape in opmath_dtype.
class LayerNormBackward final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  LayerNormBackward(int normalized_dims, bool has_weight, double eps)
      : normalized_dims_(normalized_dims), has_weight_(has_weight), eps_(eps) {}
  const char* name() const override { return "layer_norm_backward"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;

 private:
  int normalized_dims_;
  bool has_weight_;
  double eps_;
};

}  // namespace ember

/// @file
/// Layers built from core ops only: Linear, Identity, Flatten and the activations.
#pragma once

#include "nn/module.h"

namespace ember::nn {

/// y = x W^T + b with W (out, in), through the linear primitive; PyTorch's init: W kaiming_uniform_(a=sqrt(5)),
/// b U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public UnaryModule {
 public:
  /// A layer from in_features to out_features; ValueError unless both are positive.
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::string name() const override { return "Linear"; }
  std::string extra_repr() const override;
  void reset_parameters();  ///< Draws weight and bias again with PyTorch's init.

  /// the sizes of the last dim of the input and of the output @{
  int64_t in_features, out_features;
  /// @}
  /// weight (out, in), bias (out), undefined when disabled @{
  Tensor weight, bias;
  /// @}
 protected:
  Tensor forward(const Tensor& x) override;
};

/// Returns its input.
class Identity : public UnaryModule {
 public:
  std::string name() const override { return "Identity"; }
 protected:
  Tensor forward(const Tensor& x) override { return x; }
};

/// Flattens dims start_dim..end_dim into one (defaults keep the batch dim).
class Flatten : public UnaryModule {
 public:
  /// Flattens dims start_dim..end_dim.
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  std::string name() const override { return "Flatten"; }
  std::string extra_repr() const override;
  /// the first and last dims merged (negative: from the end) @{
  int64_t start_dim, end_dim;
  /// @}
 protected:
  Tensor forward(const Tensor& x) override { return flatten(x, start_dim, end_dim); }
};

/// relu(x).
class ReLU : public UnaryModule {
 public:
  std::string name() const override { return "ReLU"; }
 protected:
  Tensor forward(const Tensor& x) override { return relu(x); }
};

/// GELU, exact (erf) or with the tanh approximation.
class GELU : public UnaryModule {
 public:
  /// The erf form, or the tanh approximation.
  explicit GELU(bool tanh_approximation = false) : tanh_approximation(tanh_approximation) {}
  std::string name() const override { return "GELU"; }
  std::string extra_repr() const override { return tanh_approximation ? "approximate='tanh'" : ""; }
  bool tanh_approximation;  ///< PyTorch's approximate="tanh"
 protected:
  Tensor forward(const Tensor& x) override { return gelu(x, tanh_approximation); }
};

/// silu(x) = x * sigmoid(x).
class SiLU : public UnaryModule {
 public:
  std::string name() const override { return "SiLU"; }
 protected:
  Tensor forward(const Tensor& x) override { return silu(x); }
};

}  // namespace ember::nn

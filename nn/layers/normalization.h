/// @file
/// BatchNorm2d, LayerNorm, Dropout and Embedding over nn/normalization.h, nn/dropout.h, nn/embedding.h.
#pragma once

#include "nn/module.h"

namespace ember::nn {

/// Batch norm over (N, C, H, W) per channel: weight 1, bias 0; buffers running_mean 0,
/// running_var 1 and num_batches_tracked (i64), updated in training mode.
class BatchNorm2d : public UnaryModule {
 public:
  /// Over num_features channels (ValueError unless positive); without affine no weight and bias,
  /// without track_running_stats no buffers (batch statistics in eval too).
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true);
  std::string name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;
  void reset_parameters();  ///< Weight 1, bias 0, running statistics reset.

  int64_t num_features;  ///< channels C
  /// added to the variance; the running statistics' update rate @{
  double eps, momentum;
  /// @}
  /// parameters weight and bias (C), buffers running_mean and running_var (C) and
  /// num_batches_tracked (i64, 0-dim); undefined when disabled @{
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  /// @}
 protected:
  Tensor forward(const Tensor& x) override;
};

/// Layer norm over the trailing `normalized_shape` dims: weight 1, bias 0.
class LayerNorm : public UnaryModule {
 public:
  /// Over the trailing dims `normalized_shape`; without elementwise_affine no weight and bias.
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  /// Over the last dim, of size `features`.
  explicit LayerNorm(int64_t features, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{features}, eps, elementwise_affine) {}
  std::string name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  Shape normalized_shape;  ///< the trailing dims normalised
  double eps;              ///< added to the variance
  /// the trailing-dims scale and shift (undefined without elementwise_affine) @{
  Tensor weight, bias;
  /// @}
 protected:
  Tensor forward(const Tensor& x) override;
};

/// Zeroes elements with probability p in training mode (scaling the rest by 1/(1-p)); identity in eval.
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5);  ///< ValueError for p outside [0, 1].
  std::string name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  double p;  ///< probability of zeroing an element
 protected:
  Tensor forward(const Tensor& x) override;
};

/// A lookup table (num_embeddings, embedding_dim) initialised N(0, 1); forward takes integer indices.
class Embedding : public UnaryModule {
 public:
  /// A table of num_embeddings rows of embedding_dim; ValueError unless both are positive.
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  std::string name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& indices) override;
  /// rows and row width of the table @{
  int64_t num_embeddings, embedding_dim;
  /// @}
  Tensor weight;  ///< (num_embeddings, embedding_dim)
};

}  // namespace ember::nn

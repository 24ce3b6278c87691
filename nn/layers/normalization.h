// BatchNorm2d, LayerNorm, Dropout and Embedding over nn/normalization.h, nn/dropout.h, nn/embedding.h.
#pragma once

#include "nn/module.h"

namespace ember::nn {

// Batch norm over (N, C, H, W) per channel: weight 1, bias 0; buffers running_mean 0,
// running_var 1 and num_batches_tracked (i64), updated in training mode.
class BatchNorm2d : public UnaryModule {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true);
  std::string name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  int64_t num_features;
  double eps, momentum;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};

// Layer norm over the trailing `normalized_shape` dims: weight 1, bias 0.
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(int64_t features, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{features}, eps, elementwise_affine) {}
  std::string name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;

  Shape normalized_shape;
  double eps;
  Tensor weight, bias;
};

// Zeroes elements with probability p in training mode (scaling the rest by 1/(1-p)); identity in eval.
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5);
  std::string name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  double p;
};

// A lookup table (num_embeddings, embedding_dim) initialised N(0, 1); forward takes integer indices.
class Embedding : public UnaryModule {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  std::string name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& indices) override;
  int64_t num_embeddings, embedding_dim;
  Tensor weight;
};

}  // namespace ember::nn

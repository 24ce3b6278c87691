// BatchNorm2d, LayerNorm, Dropout, Embedding.
#include "nn/layers/normalization.h"

#include "autograd/grad_mode.h"
#include "nn/checkpoint.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/normalization.h"
#include "tensor/error.h"

namespace ember::nn {

BatchNorm2d::BatchNorm2d(int64_t n, double eps, double momentum, bool affine, bool track)
    : num_features(n), eps(eps), momentum(momentum) {
  if (n <= 0) throw ValueError("BatchNorm2d: num_features must be positive, got " + std::to_string(n));
  if (affine) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
  }
  if (track) {
    running_mean = register_buffer("running_mean", zeros({n}));
    running_var = register_buffer("running_var", ones({n}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::i64));
  }
}

void BatchNorm2d::reset_parameters() {
  NoGradGuard ng;
  if (running_mean.defined()) {
    init::zeros_(running_mean);
    init::ones_(running_var);
    zero_(num_batches_tracked);
  }
  if (weight.defined()) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

std::string BatchNorm2d::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + std::to_string(eps) + ", momentum=" + std::to_string(momentum) +
         ", affine=" + (weight.defined() ? "True" : "False") +
         ", track_running_stats=" + (running_mean.defined() ? "True" : "False");
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (x.dim() != 4) throw ShapeError("BatchNorm2d: expected a 4-D input, got " + to_string(x.shape()));
  const bool use_batch_stats = is_training() || !running_mean.defined();
  if (is_training() && num_batches_tracked.defined() && !is_recomputing()) {  // once per step
    NoGradGuard ng;
    add_(num_batches_tracked, 1);
  }
  // Without running statistics the batch's are used in eval mode too (as PyTorch does).
  return batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats, momentum, eps);
}

LayerNorm::LayerNorm(Shape shape, double eps, bool affine) : normalized_shape(shape), eps(eps) {
  if (affine) {
    weight = register_parameter("weight", ones(shape));
    bias = register_parameter("bias", zeros(shape));
  }
}

std::string LayerNorm::extra_repr() const {
  return to_string(normalized_shape) + ", eps=" + std::to_string(eps) +
         ", elementwise_affine=" + (weight.defined() ? "True" : "False");
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

Dropout::Dropout(double p) : p(p) {
  if (p < 0 || p > 1) throw ValueError("Dropout: p must be in [0, 1], got " + std::to_string(p));
}
std::string Dropout::extra_repr() const { return "p=" + std::to_string(p); }
Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }

Embedding::Embedding(int64_t num, int64_t dim) : num_embeddings(num), embedding_dim(dim) {
  if (num <= 0 || dim <= 0)
    throw ValueError("Embedding: sizes must be positive, got " + std::to_string(num) + ", " + std::to_string(dim));
  weight = register_parameter("weight", empty({num, dim}));
  init::normal_(weight);
}
std::string Embedding::extra_repr() const {
  return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
}
Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices); }

}  // namespace ember::nn

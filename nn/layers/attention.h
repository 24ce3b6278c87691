// MultiheadAttention (batch first): one in-projection (3E, E) as PyTorch's in_proj_weight /
// in_proj_bias, scaled_dot_product_attention per head (softmax(Q K^T / sqrt(d)) V), and out_proj.
#pragma once

#include "nn/layers/linear.h"

namespace ember::nn {

class MultiheadAttention : public UnaryModule {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true);
  std::string name() const override { return "MultiheadAttention"; }
  std::string extra_repr() const override;
  // query (B, L, E), key and value (B, S, E) -> (B, L, E). attn_mask (L, S) or (B*heads or B, 1.., L, S),
  // broadcast over the scores: bool (true = masked out) or floating (added to the scores).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = {});
  // Self-attention: forward(x, x, x).
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }
  void reset_parameters();

  int64_t embed_dim, num_heads, head_dim;
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
};

}  // namespace ember::nn

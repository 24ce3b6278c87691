/// @file
/// MultiheadAttention (batch first): one in-projection (3E, E) as PyTorch's in_proj_weight /
/// in_proj_bias, scaled_dot_product_attention per head (softmax(Q K^T / sqrt(d)) V), and out_proj.
#pragma once

#include "nn/layers/linear.h"

namespace ember::nn {

/// torch.nn.MultiheadAttention with batch_first=True (see the file's description).
class MultiheadAttention : public UnaryModule {
 public:
  /// ValueError unless embed_dim is a positive multiple of num_heads and dropout is in [0, 1].
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true, double dropout = 0.0);
  std::string name() const override { return "MultiheadAttention"; }
  std::string extra_repr() const override;
  /// Attention of query (B, L, E) over key and value (B, S, E), giving (B, L, E); ShapeError when they
  /// disagree. attn_mask (L, S) or (B*heads or B, 1.., L, S), broadcast over the scores: bool (true =
  /// masked out) or floating (added to the scores).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = {});
  /// PyTorch's init: in_proj_weight xavier_uniform_, the biases 0 (out_proj's weight as Linear's).
  void reset_parameters();

  /// E, the heads, and E / heads @{
  int64_t embed_dim, num_heads, head_dim;
  /// @}
  double dropout;  ///< dropout of the attention weights in training mode (PyTorch's dropout argument)
  /// (3E, E) and (3E): the query, key and value projections stacked (bias undefined without bias) @{
  Tensor in_proj_weight, in_proj_bias;
  /// @}
  std::shared_ptr<Linear> out_proj;  ///< (E, E) output projection
 protected:
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }  ///< Self-attention: forward(x, x, x).
  /// replace_module: a child may become another module of its type.
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

}  // namespace ember::nn

/// @file
/// Functional scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention).
#pragma once

#include <optional>

#include "tensor/ops.h"

namespace ember {

/// softmax(q k^T * scale + mask) v with q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev),
/// batch dims broadcast. attn_mask broadcasts to (..., L, S): bool (true = takes part, PyTorch's
/// SDPA convention) or q's dtype (added to the scores). is_causal masks key j > query i (not with
/// attn_mask). scale defaults to 1 / sqrt(E). dropout_p > 0 drops attention weights as dropout()
/// would (with `gen`, else the default generator); pass 0 outside training. A query whose keys are
/// all masked out gets a zero row and zero gradients, as PyTorch's SDPA. One fused primitive that
/// never holds the (L, S) scores: on the CPU always, on CUDA for head dims up to 128 (f16 and bf16 on
/// tensor cores) outside the deterministic mode's backward; otherwise, and with a mask that requires
/// grad, the composition scaled_dot_product_attention_math.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = {},
                                    double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt, Generator* gen = nullptr);

/// What scaled_dot_product_attention_math returns.
struct AttentionOutput {
  Tensor output;   ///< (..., L, Ev)
  Tensor weights;  ///< (..., L, S): the attention weights after dropout
};
/// The same attention composed of matmul, masked_fill, softmax and dropout (PyTorch's "math"
/// backend), returning the weights too: the reference of the fused primitive, and what callers that
/// need the weights use. Arguments are checked as scaled_dot_product_attention checks them.
AttentionOutput scaled_dot_product_attention_math(const Tensor& q, const Tensor& k, const Tensor& v,
                                                  const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                                  bool is_causal = false, std::optional<double> scale = std::nullopt,
                                                  Generator* gen = nullptr);

}  // namespace ember

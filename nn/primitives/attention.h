// Fused scaled dot-product attention: flash attention's tiled forward and backward, which never hold
// the (L, S) score matrix. CPU kernels in cpu/attention.cpp, CUDA kernels in cuda/attention.cu,
// front end and vjp in nn/attention.cpp.
#pragma once

#include "tensor/philox.h"
#include "tensor/primitive.h"

namespace ember {

// What one attention call computes besides its inputs: the score scale, the causal (top-left)
// mask, and dropout on the weights drawn from Philox at `counter` as rand() would draw a (N, L, S)
// f32 tensor there, so the backward regenerates the mask instead of storing it.
struct AttentionParams {
  double scale = 1;
  bool causal = false;
  bool has_mask = false;
  double dropout_p = 0;
  philox::Counter counter;
};

// Inputs {q (N, L, E), k (N, S, E), v (N, S, Ev), all contiguous and of one floating dtype,
// [mask (B..., L, S) with prod(B) = N, any strides: bool (true = take part) or q's dtype (added)]}.
// Outputs {out (N, L, Ev) in q's dtype, stats (N, L, 2) in its opmath dtype}: each row's max score m
// and sum l of e^(s - m), so that the backward recomputes the weights e^(s - m) / l; m is +inf and l 0
// for a row whose keys are all masked (its output row is 0). Kept apart rather than as one logsumexp
// m + log l, whose rounding (|m| 2^-24 in f32) would grow every weight's error with the scores.
class ScaledDotProductAttention final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs | kSaveOutputs;
  explicit ScaledDotProductAttention(const AttentionParams& p) : p_(p) {}
  const char* name() const override { return "scaled_dot_product_attention"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  AttentionParams p_;
};

// The backward kernel (first order; the vjp composes public ops when the backward is recorded).
// Inputs {q, k, v, out, g (out's cotangent, contiguous), stats, [mask]} as above; outputs
// {dq, dk, dv} in q's dtype.
class ScaledDotProductAttentionBackward final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  explicit ScaledDotProductAttentionBackward(const AttentionParams& p) : p_(p) {}
  const char* name() const override { return "scaled_dot_product_attention_backward"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const {
    return {{in[0].shape(), in[0].dtype()}, {in[1].shape(), in[1].dtype()}, {in[2].shape(), in[2].dtype()}};
  }
  EMBER_PRIMITIVE_KERNELS;

 private:
  AttentionParams p_;
};

// Whether the CUDA kernels take q (N, L, E) and v (N, S, Ev) of `dtype` on `device`: head dims from
// 1 to 128, and both kernels' shared memory within what a block of that GPU may have (f64: head dims
// up to 80 on an A100, 112 on an H100). Calls they do not take go to the composition. Defined in cuda/attention.cpp (false
// in builds without CUDA: cuda/absent.cpp).
bool cuda_attention_fused(DType dtype, int64_t E, int64_t Ev, Device device);

}  // namespace ember

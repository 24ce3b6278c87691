// MultiheadAttention.
#include "nn/layers/attention.h"

#include "autograd/grad_mode.h"
#include "nn/attention.h"
#include "nn/init.h"
#include "tensor/error.h"

namespace ember::nn {

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, bool with_bias, double p)
    : embed_dim(e), num_heads(h), dropout(p) {
  if (e <= 0 || h <= 0 || e % h != 0)
    throw ValueError("MultiheadAttention: embed_dim " + std::to_string(e) + " must be a positive multiple of num_heads " +
                     std::to_string(h));
  if (!(p >= 0 && p <= 1)) throw ValueError("MultiheadAttention: dropout must be in [0, 1], got " + std::to_string(p));
  head_dim = e / h;
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
  if (with_bias) in_proj_bias = register_parameter("in_proj_bias", empty({3 * e}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, with_bias));
  reset_parameters();
}

// PyTorch's _reset_parameters: xavier_uniform_ in_proj, zero biases (out_proj weight keeps Linear's init).
void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
}

std::string MultiheadAttention::extra_repr() const {
  return "embed_dim=" + std::to_string(embed_dim) + ", num_heads=" + std::to_string(num_heads) +
         (dropout > 0 ? ", dropout=" + std::to_string(dropout) : "");
}

Tensor MultiheadAttention::forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                   const Tensor& attn_mask) {
  if (q_in.dim() != 3 || k_in.dim() != 3 || v_in.dim() != 3 || q_in.size(2) != embed_dim ||
      k_in.size(2) != embed_dim || v_in.size(2) != embed_dim || k_in.size(0) != q_in.size(0) ||
      !(k_in.shape() == v_in.shape()))
    throw ShapeError("MultiheadAttention: query " + to_string(q_in.shape()) + ", key " + to_string(k_in.shape()) +
                     ", value " + to_string(v_in.shape()) + " must be (B, L, " + std::to_string(embed_dim) +
                     "), (B, S, E), (B, S, E)");
  const int64_t B = q_in.size(0), L = q_in.size(1), S = k_in.size(1), E = embed_dim;
  // Projections with the three (E, E) slices of in_proj_weight.
  auto project = [&](const Tensor& x, int64_t i) {  // (B, T, E)
    return linear(x, narrow(in_proj_weight, 0, i * E, E),
                  in_proj_bias.defined() ? narrow(in_proj_bias, 0, i * E, E) : Tensor());
  };
  auto heads = [&](const Tensor& y, int64_t T) {  // (B, T, E) -> (B, h, T, d)
    return reshape(y, {B, T, num_heads, head_dim}).transpose(1, 2);
  };
  Tensor q = heads(project(q_in, 0), L), k = heads(project(k_in, 1), S), v = heads(project(v_in, 2), S);
  // nn.MultiheadAttention's bool mask marks what is masked out; SDPA's marks what takes part.
  Tensor mask = attn_mask;
  if (mask.defined()) {
    if (mask.dim() == 3) mask = reshape(mask, {B, num_heads, L, S});  // PyTorch's (B*h, L, S) layout
    mask = mask.dtype() == DType::boolean ? logical_not(mask) : mask.to(q.dtype());
  }
  Tensor out = scaled_dot_product_attention(q, k, v, mask, is_training() ? dropout : 0.0).transpose(1, 2);  // (B, L, h, d)
  return (*out_proj)(reshape(out, {B, L, E}));
}

void MultiheadAttention::rebind_child(const std::string& n, const std::shared_ptr<Module>& m) {
  if (!rebind(n, "out_proj", m, out_proj)) Module::rebind_child(n, m);
}

}  // namespace ember::nn

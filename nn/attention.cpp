// Front end, composition ("math") and vjp of scaled dot-product attention.
#include "nn/attention.h"

#include <cmath>
#include <limits>
#include <string>

#include "autograd/grad_mode.h"
#include "nn/dropout.h"
#include "nn/primitives/attention.h"
#include "tensor/autocast.h"
#include "tensor/deterministic.h"
#include "tensor/primitives/creation.h"

namespace ember {

namespace {

const std::string kOp = "scaled_dot_product_attention";
constexpr double kInf = std::numeric_limits<double>::infinity();

Shape leading(const Shape& s, int keep) {  // s without its last `keep` dims
  Shape b;
  for (int d = 0; d + keep < s.size(); ++d) b.push_back(s[d]);
  return b;
}
Shape with_tail(Shape b, int64_t rows, int64_t cols) {
  b.push_back(rows);
  b.push_back(cols);
  return b;
}

struct Checked {
  Shape batch;  // the broadcast batch dims of the result
  int64_t L, S, E, Ev;
  double scale;
};

Checked check_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double p, bool causal,
                   std::optional<double> scale) {
  if (!q.defined() || !k.defined() || !v.defined())
    throw ValueError(kOp + ": query, key and value must be defined tensors");
  const std::string args = "query " + to_string(q.shape()) + " " + dtype_name(q.dtype()) + " on " + q.device().str() +
                           ", key " + to_string(k.shape()) + " " + dtype_name(k.dtype()) + " on " + k.device().str() +
                           ", value " + to_string(v.shape()) + " " + dtype_name(v.dtype()) + " on " + v.device().str();
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2)
    throw ShapeError(kOp + ": expected query (..., L, E), key (..., S, E) and value (..., S, Ev), got " + args);
  if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw DTypeError(kOp + ": expected query, key and value of one floating dtype, got " + args);
  if (!(k.device() == q.device()) || !(v.device() == q.device()))
    throw DeviceError(kOp + ": expected query, key and value on one device, got " + args);
  Checked c{{}, q.size(-2), k.size(-2), q.size(-1), v.size(-1), 0};
  if (k.size(-1) != c.E || v.size(-2) != c.S)
    throw ShapeError(kOp + ": key must be (..., S, " + std::to_string(c.E) + ") and value (..., S, Ev) for " + args);
  try {
    c.batch = broadcast_shapes(broadcast_shapes(leading(q.shape(), 2), leading(k.shape(), 2), "batch"),
                               leading(v.shape(), 2), "batch");
  } catch (const ShapeError&) {
    throw ShapeError(kOp + ": the batch dims of " + args + " don't broadcast");
  }
  if (mask.defined()) {
    const std::string m = "attn_mask " + to_string(mask.shape()) + " " + dtype_name(mask.dtype()) + " on " +
                          mask.device().str();
    if (causal)
      throw ValueError(kOp + ": attn_mask and is_causal = true given together (" + m + "); pass one of them");
    if (mask.dtype() != DType::boolean && mask.dtype() != q.dtype())
      throw DTypeError(kOp + ": " + m + " must be bool or the query's dtype " + dtype_name(q.dtype()));
    if (!(mask.device() == q.device())) throw DeviceError(kOp + ": " + m + " is not on the query's device " + q.device().str());
    const bool fits = (mask.dim() < 1 || mask.size(-1) == 1 || mask.size(-1) == c.S) &&
                      (mask.dim() < 2 || mask.size(-2) == 1 || mask.size(-2) == c.L);
    try {
      if (!fits) throw ShapeError("");
      c.batch = broadcast_shapes(c.batch, leading(mask.shape(), 2), "batch");
    } catch (const ShapeError&) {
      throw ShapeError(kOp + ": " + m + " doesn't broadcast to the scores " + to_string(with_tail(c.batch, c.L, c.S)) +
                       " of " + args);
    }
  }
  if (!(p >= 0 && p <= 1))
    throw ValueError(kOp + ": dropout_p has to be between 0 and 1, but got " + std::to_string(p));
  c.scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(c.E));
  return c;
}

// q k^T * scale with the causal mask (key j > query i out) and attn_mask applied: (..., L, S).
Tensor masked_scores(const Tensor& q, const Tensor& k, const Tensor& mask, bool causal, double scale) {
  Tensor s = matmul(q, k.transpose(-2, -1)) * scale;
  if (causal) {
    const int64_t L = q.size(-2), S = k.size(-2);
    const Tensor later = gt(arange(S, DType::i64, q.device()).unsqueeze(0), arange(L, DType::i64, q.device()).unsqueeze(1));
    s = masked_fill(s, later, -kInf);
  }
  if (mask.defined()) s = mask.dtype() == DType::boolean ? masked_fill(s, logical_not(mask), -kInf) : s + mask;
  return s;
}

// softmax over the last dim with 0 weights (and 0 gradients) on rows whose scores are all -inf,
// where softmax gives NaN: PyTorch's _safe_softmax, which its SDPA uses.
Tensor safe_softmax(const Tensor& s) {
  Tensor dead;
  {
    NoGradGuard no_grad;
    dead = eq(amax(s, {-1}, true), -kInf);  // (..., L, 1)
  }
  return masked_fill(softmax(masked_fill(s, dead, 0.0), -1), dead, 0.0);
}

AttentionOutput math(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double p, bool causal,
                     double scale, Generator* gen) {
  const Tensor s = masked_scores(q, k, mask, causal, scale);
  Tensor w = mask.defined() ? safe_softmax(s) : softmax(s, -1);  // causal alone leaves key 0 to every row
  if (p > 0) w = dropout(w, p, true, gen);
  return {matmul(w, v), w};
}

// Whether the fused primitive takes the call, else the composition: not when the mask needs a
// gradient (the fused vjp gives none) nor for dropout_p = 1 (all zeros, not worth a kernel path); on
// CUDA, where cuda_attention_fused says the kernels fit, and not for a backward in the deterministic
// mode (the CUDA backward sums dq with atomics).
bool fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double p, const Checked& c) {
  const bool records = autograd::GradMode::is_enabled();
  if ((mask.defined() && mask.requires_grad() && records) || p >= 1) return false;
  if (q.device().is_cpu()) return true;
  const bool backward = records && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  return q.device().is_cuda() && cuda_attention_fused(q.dtype(), c.E, c.Ev, q.device()) &&
         !(backward && is_deterministic());
}

}  // namespace

AttentionOutput scaled_dot_product_attention_math(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                                  const Tensor& mask_in, double dropout_p, bool is_causal,
                                                  std::optional<double> scale, Generator* gen) {
  const auto [q, k, v, mask] = amp::autocast_args(kOp, q_in, k_in, v_in, mask_in);
  const Checked c = check_args(q, k, v, mask, dropout_p, is_causal, scale);
  return math(q, k, v, mask, dropout_p, is_causal, c.scale, gen);
}

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& mask_in,
                                    double dropout_p, bool is_causal, std::optional<double> scale, Generator* gen) {
  const auto [q, k, v, mask] = amp::autocast_args(kOp, q_in, k_in, v_in, mask_in);
  const Checked c = check_args(q, k, v, mask, dropout_p, is_causal, scale);
  if (!fused(q, k, v, mask, dropout_p, c)) {
    // The composition keeps 16-bit inputs' scores and weights in f32 and rounds the output once, as
    // the fused kernels do: in bf16 throughout it had 4-8x their error (a mask that requires grad
    // comes here, for its gradient).
    const DType ct = opmath_dtype(q.dtype());
    const Tensor m = mask.defined() && mask.dtype() != DType::boolean ? mask.to(ct) : mask;
    return math(q.to(ct), k.to(ct), v.to(ct), m, dropout_p, is_causal, c.scale, gen).output.to(q.dtype());
  }

  const int64_t N = numel(c.batch), L = c.L, S = c.S;
  auto flat = [&](const Tensor& x, int64_t rows, int64_t cols) {  // (N, rows, cols), contiguous
    return reshape(x.expand(with_tail(c.batch, rows, cols)), {N, rows, cols}).contiguous();
  };
  std::vector<Tensor> in{flat(q, L, c.E), flat(k, S, c.E), flat(v, S, c.Ev)};
  AttentionParams p{c.scale, is_causal, mask.defined(), dropout_p, {}};
  if (mask.defined()) in.push_back(mask.expand(with_tail(c.batch, L, S)));  // a view: never (N, L, S) in memory
  if (dropout_p > 0) {
    Generator& g = gen ? *gen : default_generator();
    p.counter = g.draw(RandomFill::blocks_for(RandomFill::Kind::uniform, DType::f32, N * L * S), q.device());
  }
  return reshape(run(ScaledDotProductAttention(p), in)[0], with_tail(c.batch, L, c.Ev));
}

std::vector<OutputSpec> ScaledDotProductAttention::infer(const std::vector<Tensor>& in) const {
  const Tensor& q = in[0];
  return {{Shape{q.size(0), q.size(1), in[2].size(2)}, q.dtype()}, {Shape{q.size(0), q.size(1), 2}, opmath_dtype(q.dtype())}};
}

// First order: the backward kernel. Recorded (double backward): the same formulas with public ops,
// with P the weights, Z the dropout factors and g the output's cotangent:
//   dv = (P Z)^T g,  dS = P * (dP - rowsum(dP * P)) with dP = Z * (g v^T),  dq = scale * dS k,
//   dk = scale * dS^T q.  These hold (N, L, S) tensors, as any recorded composition would.
std::vector<Tensor> ScaledDotProductAttention::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                                   const std::vector<Tensor>& out) {
  std::vector<Tensor> grads(in.size());
  if (!autograd::GradMode::is_enabled()) {
    std::vector<Tensor> bin{in[0], in[1], in[2], out[0], g[0].contiguous(), out[1]};
    if (p_.has_mask) bin.push_back(in[3]);
    std::vector<Tensor> d = run(ScaledDotProductAttentionBackward(p_), bin);
    for (size_t i = 0; i < 3; ++i) grads[i] = d[i];
    return grads;
  }
  const DType ct = opmath_dtype(in[0].dtype());
  const Tensor q = in[0].to(ct), k = in[1].to(ct), v = in[2].to(ct), go = g[0].to(ct);
  const int64_t N = q.size(0), L = q.size(1), S = k.size(1);
  Tensor mask;
  if (p_.has_mask) {
    mask = reshape(in[3], {N, L, S});
    if (mask.dtype() != DType::boolean) mask = mask.to(ct);
  }
  const Tensor w = p_.has_mask ? safe_softmax(masked_scores(q, k, mask, p_.causal, p_.scale))
                               : softmax(masked_scores(q, k, mask, p_.causal, p_.scale), -1);  // (N, L, S)
  Tensor wz = w, dp = matmul(go, v.transpose(1, 2));                                             // (N, L, S)
  if (p_.dropout_p > 0) {
    if (p_.counter.base != nullptr)  // its base lies in device memory, and the generator below runs on the host
      throw CaptureError("captured step: the recorded (double) backward of scaled_dot_product_attention with dropout");
    Generator gen;
    gen.set_state({p_.counter.seed, p_.counter.first_block});
    const Tensor z = ge(rand(w.shape(), TensorOptions(DType::f32).with_device(w.device()), &gen), p_.dropout_p).to(ct) *
                     (1.0 / (1.0 - p_.dropout_p));
    wz = w * z;
    dp = dp * z;
  }
  const Tensor ds = w * (dp - sum(dp * w, {-1}, true));  // (N, L, S)
  grads[0] = matmul(ds, k) * p_.scale;
  grads[1] = matmul(ds.transpose(1, 2), q) * p_.scale;
  grads[2] = matmul(wz.transpose(1, 2), go);
  return grads;
}

}  // namespace ember

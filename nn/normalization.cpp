// Front ends and vjps of batch norm and layer norm. The vjps recompute the statistics from the
// saved input with public ops (one extra reduction), so double backward comes for free.
#include "nn/normalization.h"

#include "autograd/grad_mode.h"
#include "nn/checkpoint.h"
#include "nn/primitives/normalization.h"
#include "tensor/autocast.h"

namespace ember {

namespace {

// A parameter of `want` shape whose dtype is x's or (for 16-bit x) f32, the statistics' opmath dtype.
void check_param(const char* op, const char* what, const Tensor& p, const Shape& want, DType x) {
  if (!p.defined()) return;
  if (!(p.shape() == want))
    throw ShapeError(std::string(op) + ": " + what + " has shape " + to_string(p.shape()) + ", expected " +
                     to_string(want));
  if (p.dtype() != x && p.dtype() != opmath_dtype(x))
    throw DTypeError(std::string(op) + ": " + what + " is " + dtype_name(p.dtype()) + " but input is " +
                     dtype_name(x) + " (expected " + dtype_name(x) + " or " + dtype_name(opmath_dtype(x)) + ")");
}

// The shape (1, C, 1, ...) a per-channel vector broadcasts from, and the dims batch norm reduces.
Shape channel_shape(const Shape& x) {
  Shape s = Dims::filled(x.size(), 1);
  s[1] = x[1];
  return s;
}
Shape batch_dims(int rank) {
  Shape d;
  for (int i = 0; i < rank; ++i)
    if (i != 1) d.push_back(i);
  return d;
}

}  // namespace

std::vector<OutputSpec> BatchNorm::infer(const std::vector<Tensor>& in) const {
  const Tensor& x = in[0];
  if (!training_) return {{x.shape(), x.dtype()}};
  const Shape c{x.size(1)};
  return {{x.shape(), x.dtype()}, {c, opmath_dtype(x.dtype())}, {c, opmath_dtype(x.dtype())}};
}

Tensor batch_norm(const Tensor& input_in, const Tensor& running_mean_in, const Tensor& running_var_in,
                  const Tensor& weight_in, const Tensor& bias_in, bool training, double momentum, double eps) {
  const auto [input, running_mean, running_var, weight, bias] =
      amp::autocast_args("batch_norm", input_in, running_mean_in, running_var_in, weight_in, bias_in);
  const char* op = "batch_norm";
  if (input.dim() < 2)
    throw ShapeError(std::string(op) + ": expected input of rank >= 2 (N, C, ...), got shape " +
                     to_string(input.shape()));
  if (!is_floating(input.dtype()))
    throw DTypeError(std::string(op) + ": expected a floating input, got " + dtype_name(input.dtype()));
  if (!(eps > 0)) throw ValueError(std::string(op) + ": expected eps > 0, got " + std::to_string(eps));
  const int64_t C = input.size(1);
  const Shape c{C};
  check_param(op, "weight", weight, c, input.dtype());
  check_param(op, "bias", bias, c, input.dtype());
  check_param(op, "running_mean", running_mean, c, input.dtype());
  check_param(op, "running_var", running_var, c, input.dtype());
  if (running_mean.defined() != running_var.defined())
    throw ValueError(std::string(op) + ": running_mean and running_var must be given together");
  if (!training && !running_mean.defined())
    throw ValueError(std::string(op) + ": eval mode (training=false) needs running_mean and running_var");
  const int64_t per_channel = C == 0 ? 0 : input.numel() / C;
  if (training && per_channel <= 1)
    throw ValueError(std::string(op) + ": expected more than 1 value per channel when training, got input shape " +
                     to_string(input.shape()));

  std::vector<Tensor> in{input};
  if (weight.defined()) in.push_back(weight);
  if (bias.defined()) in.push_back(bias);
  if (!training) {
    in.push_back(running_mean);
    in.push_back(running_var);
  }
  std::vector<Tensor> out = run(BatchNorm(training, weight.defined(), bias.defined(), eps), in);
  if (training && running_mean.defined() && !nn::is_recomputing()) {  // once per step: not again in a recompute
    // In the statistics' f32 and rounded once into 16-bit running statistics.
    NoGradGuard no_grad;
    const double m = static_cast<double>(per_channel);
    const Tensor unbiased = out[2].detach() * (m / (m - 1));
    Tensor rm = running_mean, rv = running_var;
    copy_(rm, rm.to(out[1].dtype()) * (1 - momentum) + out[1].detach() * momentum);
    copy_(rv, rv.to(unbiased.dtype()) * (1 - momentum) + unbiased * momentum);
  }
  return out[0];
}

// With xhat = (x - mean) * rstd, gw = g * weight and means over the batch dims (M elements),
// computed by the BatchNormBackward kernel, or with public ops when the backward is recorded:
//   training: dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))
//             (+ g_mean / M + g_var * 2 (x - mean) / M for the statistics outputs)
//   eval:     dx = gw * rstd
//   dweight = sum(g * xhat), dbias = sum(g)
std::vector<Tensor> BatchNorm::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                   const std::vector<Tensor>&) {
  const Tensor& x = in[0];
  size_t next = 1;
  const int wi = has_weight_ ? static_cast<int>(next++) : -1;
  const int bi = has_bias_ ? static_cast<int>(next++) : -1;
  const DType sd = opmath_dtype(x.dtype());
  if (!autograd::GradMode::is_enabled()) {  // first order: the fused backward kernel
    std::vector<Tensor> bin{x, g[0]};  // any layout: the kernel copies only odd ones
    if (wi >= 0) bin.push_back(in[wi]);
    if (training_) {
      bin.push_back(g[1]);
      bin.push_back(g[2]);
    } else {
      bin.push_back(in[next]);
      bin.push_back(in[next + 1]);
    }
    std::vector<Tensor> d = run(BatchNormBackward(training_, wi >= 0, eps_), bin);
    std::vector<Tensor> grads(in.size());
    if (input_needs_grad(0)) grads[0] = d[0];
    if (wi >= 0 && input_needs_grad(wi)) grads[wi] = d[1].to(in[wi].dtype());
    if (bi >= 0 && input_needs_grad(bi)) grads[bi] = d[2].to(in[bi].dtype());
    return grads;
  }
  const Shape ps = channel_shape(x.shape());  // (1, C, 1, ...)
  const Shape dims = batch_dims(x.dim());
  const Tensor xf = x.to(sd);
  Tensor mu, rstd;
  if (training_) {
    mu = mean(xf, dims, true);
    rstd = rsqrt(var(xf, dims, 0, true) + eps_);
  } else {
    mu = in[next].to(sd).reshape(ps);
    rstd = rsqrt(in[next + 1].to(sd).reshape(ps) + eps_);
  }
  const Tensor xc = xf - mu;       // (N, C, ...)
  const Tensor xhat = xc * rstd;   // (N, C, ...)
  const Tensor go = g[0].to(sd);   // (N, C, ...)
  std::vector<Tensor> grads(in.size());
  if (input_needs_grad(0)) {
    const Tensor gw = wi >= 0 ? go * in[wi].to(sd).reshape(ps) : go;
    Tensor dx;
    if (training_) {
      dx = rstd * (gw - mean(gw, dims, true) - xhat * mean(gw * xhat, dims, true));
      const double m = static_cast<double>(x.numel() / x.size(1));
      dx = dx + g[1].to(sd).reshape(ps) * (1.0 / m) + g[2].to(sd).reshape(ps) * xc * (2.0 / m);
    } else {
      dx = gw * rstd;
    }
    grads[0] = dx.to(x.dtype());
  }
  if (wi >= 0 && input_needs_grad(wi)) grads[wi] = sum(go * xhat, dims).to(in[wi].dtype());
  if (bi >= 0 && input_needs_grad(bi)) grads[bi] = sum(go, dims).to(in[bi].dtype());
  return grads;
}

std::vector<OutputSpec> BatchNormBackward::infer(const std::vector<Tensor>& in) const {
  const Shape c{in[0].size(1)};
  return {{in[0].shape(), in[0].dtype()}, {c, opmath_dtype(in[0].dtype())}, {c, opmath_dtype(in[0].dtype())}};
}

Tensor layer_norm(const Tensor& input_in, const Shape& normalized_shape, const Tensor& weight_in,
                  const Tensor& bias_in, double eps) {
  const auto [input, weight, bias] = amp::autocast_args("layer_norm", input_in, weight_in, bias_in);
  const char* op = "layer_norm";
  if (!is_floating(input.dtype()))
    throw DTypeError(std::string(op) + ": expected a floating input, got " + dtype_name(input.dtype()));
  const int k = normalized_shape.size();
  bool ok = k >= 1 && k <= input.dim();
  for (int i = 0; ok && i < k; ++i) ok = input.size(input.dim() - k + i) == normalized_shape[i];
  if (!ok)
    throw ShapeError(std::string(op) + ": normalized_shape " + to_string(normalized_shape) +
                     " doesn't match the trailing dims of input " + to_string(input.shape()));
  if (!(eps > 0)) throw ValueError(std::string(op) + ": expected eps > 0, got " + std::to_string(eps));
  check_param(op, "weight", weight, normalized_shape, input.dtype());
  check_param(op, "bias", bias, normalized_shape, input.dtype());
  std::vector<Tensor> in{input.contiguous()};
  if (weight.defined()) in.push_back(weight.contiguous());
  if (bias.defined()) in.push_back(bias.contiguous());
  return run1(LayerNorm(k, weight.defined(), bias.defined(), eps), in);
}

std::vector<OutputSpec> LayerNormBackward::infer(const std::vector<Tensor>& in) const {
  Shape ns;
  for (int d = in[0].dim() - normalized_dims_; d < in[0].dim(); ++d) ns.push_back(in[0].size(d));
  const DType sd = opmath_dtype(in[0].dtype());
  return {{in[0].shape(), in[0].dtype()}, {ns, sd}, {ns, sd}};
}

// Computed by the LayerNormBackward kernel, or with public ops when the backward is recorded.
// Means over the normalised dims: dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)),
// gw = g * weight; dweight = sum over the leading dims of g * xhat, dbias of g.
std::vector<Tensor> LayerNorm::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                   const std::vector<Tensor>&) {
  const Tensor& x = in[0];
  const int wi = has_weight_ ? 1 : -1;
  const int bi = has_bias_ ? (has_weight_ ? 2 : 1) : -1;
  const DType sd = opmath_dtype(x.dtype());
  if (!autograd::GradMode::is_enabled()) {  // first order: the fused backward kernel
    std::vector<Tensor> bin{x, g[0].contiguous()};
    if (wi >= 0) bin.push_back(in[wi]);
    std::vector<Tensor> d = run(LayerNormBackward(normalized_dims_, wi >= 0, eps_), bin);
    std::vector<Tensor> grads(in.size());
    if (input_needs_grad(0)) grads[0] = d[0];
    if (wi >= 0 && input_needs_grad(wi)) grads[wi] = d[1].to(in[wi].dtype());
    if (bi >= 0 && input_needs_grad(bi)) grads[bi] = d[2].to(in[bi].dtype());
    return grads;
  }
  Shape dims;
  for (int i = x.dim() - normalized_dims_; i < x.dim(); ++i) dims.push_back(i);
  const Tensor xf = x.to(sd);
  const Tensor rstd = rsqrt(var(xf, dims, 0, true) + eps_);  // (..., 1, 1)
  const Tensor xhat = (xf - mean(xf, dims, true)) * rstd;
  const Tensor go = g[0].to(sd);
  std::vector<Tensor> grads(in.size());
  if (input_needs_grad(0)) {
    const Tensor gw = wi >= 0 ? go * in[wi].to(sd) : go;
    grads[0] = (rstd * (gw - mean(gw, dims, true) - xhat * mean(gw * xhat, dims, true))).to(x.dtype());
  }
  if (wi >= 0 && input_needs_grad(wi)) grads[wi] = sum_to(go * xhat, in[wi].shape()).to(in[wi].dtype());
  if (bi >= 0 && input_needs_grad(bi)) grads[bi] = sum_to(go, in[bi].shape()).to(in[bi].dtype());
  return grads;
}

}  // namespace ember

// torch.nn.init's formulas on ember ops.
#include "nn/init.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "tensor/error.h"

namespace ember::nn::init {

namespace {
// Random draws are made in f64 for f64 tensors and in f32 otherwise, then copied (converted).
TensorOptions draw_options(const Tensor& t) {
  TensorOptions o;
  o.dtype = t.dtype() == DType::f64 ? DType::f64 : DType::f32;
  o.device = t.device();
  return o;
}
void check(const Tensor& t, const char* op) {
  if (!t.defined()) throw ValueError(std::string(op) + ": undefined tensor");
  if (!t.is_floating_point()) throw DTypeError(std::string(op) + ": expected a floating tensor, got " + dtype_name(t.dtype()));
}
}  // namespace

double calculate_gain(const std::string& nl, std::optional<double> param) {
  if (nl == "linear" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" || nl == "conv_transpose1d" ||
      nl == "conv_transpose2d" || nl == "conv_transpose3d" || nl == "sigmoid")
    return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  if (nl == "selu") return 3.0 / 4.0;
  throw ValueError("calculate_gain: unsupported nonlinearity '" + nl + "'");
}

Fans calculate_fan_in_and_fan_out(const Tensor& t) {
  if (t.dim() < 2)
    throw ValueError("fan in and fan out need a tensor of at least 2 dims, got shape " + to_string(t.shape()));
  int64_t receptive = 1;
  for (int d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}
int64_t fan_in(const Tensor& t) { return calculate_fan_in_and_fan_out(t).fan_in; }
int64_t fan_out(const Tensor& t) { return calculate_fan_in_and_fan_out(t).fan_out; }

Tensor& uniform_(Tensor& t, double a, double b, Generator* gen) {
  check(t, "uniform_");
  NoGradGuard ng;
  Tensor r = rand(t.shape(), draw_options(t), gen);
  return copy_(t, r * (b - a) + a);
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check(t, "normal_");
  if (std < 0) throw ValueError("normal_: std must be >= 0, got " + std::to_string(std));
  NoGradGuard ng;
  Tensor r = randn(t.shape(), draw_options(t), gen);
  return copy_(t, r * std + mean);
}

Tensor& constant_(Tensor& t, double value) {
  if (!t.defined()) throw ValueError("constant_: undefined tensor");
  NoGradGuard ng;
  return fill_(t, value);
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, const std::string& nl, const char* op) {
  check(t, op);
  const Fans f = calculate_fan_in_and_fan_out(t);
  const int64_t fan = mode == FanMode::fan_in ? f.fan_in : f.fan_out;
  if (fan == 0) throw ValueError(std::string(op) + ": zero fan for a tensor of shape " + to_string(t.shape()));
  return calculate_gain(nl, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, const std::string& nl, Generator* gen) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl, "kaiming_uniform_");
  return uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, const std::string& nl, Generator* gen) {
  return normal_(t, 0.0, kaiming_std(t, a, mode, nl, "kaiming_normal_"), gen);
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check(t, "xavier_uniform_");
  const Fans f = calculate_fan_in_and_fan_out(t);
  const double a = gain * std::sqrt(6.0 / static_cast<double>(f.fan_in + f.fan_out));
  return uniform_(t, -a, a, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  check(t, "xavier_normal_");
  const Fans f = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out)), gen);
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, Generator* gen) {
  check(t, "trunc_normal_");
  if (!(a < b)) throw ValueError("trunc_normal_: need a < b, got a=" + std::to_string(a) + " b=" + std::to_string(b));
  NoGradGuard ng;
  const TensorOptions o = draw_options(t);
  Tensor x = randn(t.shape(), o, gen) * std + mean;
  // Rejection: redraw the entries outside [a, b]; each round keeps most of what is left.
  for (int round = 0; round < 1000; ++round) {
    // x < a and x > b never hold together (a < b), so "either" is "differ".
    Tensor outside = ne(lt(x, a), gt(x, b));
    if (sum(outside.to(DType::i64)).item<int64_t>() == 0) return copy_(t, x);
    x = where(outside, randn(t.shape(), o, gen) * std + mean, x);
  }
  throw ValueError("trunc_normal_: [" + std::to_string(a) + ", " + std::to_string(b) +
                   "] holds too little of N(" + std::to_string(mean) + ", " + std::to_string(std) + "^2)");
}

}  // namespace ember::nn::init

// Conv2d, ConvTranspose2d and the pooling layers.
#include "nn/layers/conv.h"

#include <cmath>

#include "nn/conv.h"
#include "nn/init.h"
#include "nn/pooling.h"
#include "tensor/error.h"

namespace ember::nn {

namespace {

// PyTorch's init of a conv weight and bias: kaiming_uniform_(a = sqrt(5)), the bias U(+-1/sqrt(fan_in)),
// fan_in being the weight's second dim times the kernel's area.
void reset_conv_parameters(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::fan_in(weight)));
    init::uniform_(bias, -bound, bound);
  }
}

// The repr both convolutions share (output_padding: the transposed one's, shown when not 0).
std::string conv_repr(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t output_padding, int64_t g,
                      int64_t d, bool with_bias) {
  const auto pair = [](int64_t v) {
    const std::string n = std::to_string(v);
    std::string r = "(";  // appended, not "(" + n: GCC 12 misreads that as an overlapping copy (-Wrestrict)
    return r.append(n).append(", ").append(n).append(")");
  };
  std::string r = std::to_string(in) + ", " + std::to_string(out) + ", kernel_size=" + pair(k) + ", stride=" + pair(s);
  if (p) r += ", padding=" + pair(p);
  if (output_padding) r += ", output_padding=" + pair(output_padding);
  if (d != 1) r += ", dilation=" + pair(d);
  if (g != 1) r += ", groups=" + std::to_string(g);
  if (!with_bias) r += ", bias=False";
  return r;
}

std::string conv_arguments(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t g, int64_t d) {
  return "in=" + std::to_string(in) + " out=" + std::to_string(out) + " kernel=" + std::to_string(k) +
         " stride=" + std::to_string(s) + " padding=" + std::to_string(p) + " groups=" + std::to_string(g) +
         " dilation=" + std::to_string(d);
}

bool conv_arguments_valid(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t g, int64_t d) {
  return in > 0 && out > 0 && k > 0 && s > 0 && p >= 0 && g > 0 && d > 0 && in % g == 0 && out % g == 0;
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, bool with_bias, int64_t g, int64_t d)
    : in_channels(in), out_channels(out), kernel_size(k), stride(s), padding(p), groups(g), dilation(d) {
  if (!conv_arguments_valid(in, out, k, s, p, g, d))
    throw ValueError("Conv2d: bad arguments " + conv_arguments(in, out, k, s, p, g, d));
  weight = register_parameter("weight", empty({out, in / g, k, k}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Conv2d::reset_parameters() { reset_conv_parameters(weight, bias); }

std::string Conv2d::extra_repr() const {
  return conv_repr(in_channels, out_channels, kernel_size, stride, padding, 0, groups, dilation, bias.defined());
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, {stride, stride}, {padding, padding}, {dilation, dilation}, groups);
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t op, int64_t g,
                                 bool with_bias, int64_t d)
    : in_channels(in), out_channels(out), kernel_size(k), stride(s), padding(p), output_padding(op), groups(g),
      dilation(d) {
  if (!conv_arguments_valid(in, out, k, s, p, g, d) || op < 0 || op >= std::max(s, d))
    throw ValueError("ConvTranspose2d: bad arguments " + conv_arguments(in, out, k, s, p, g, d) +
                     " output_padding=" + std::to_string(op) +
                     " (output_padding must be non-negative and below the stride or the dilation)");
  weight = register_parameter("weight", empty({in, out / g, k, k}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void ConvTranspose2d::reset_parameters() { reset_conv_parameters(weight, bias); }

std::string ConvTranspose2d::extra_repr() const {
  return conv_repr(in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, dilation,
                   bias.defined());
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return conv_transpose2d(x, weight, bias, {stride, stride}, {padding, padding}, {output_padding, output_padding},
                          groups, {dilation, dilation});
}

namespace {
std::string pool_repr(int64_t k, int64_t s, int64_t p) {
  return "kernel_size=" + std::to_string(k) + ", stride=" + std::to_string(s) + ", padding=" + std::to_string(p);
}
}  // namespace

std::string MaxPool2d::extra_repr() const { return pool_repr(kernel_size, stride, padding); }
Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, {kernel_size, kernel_size}, std::array<int64_t, 2>{stride, stride}, {padding, padding});
}

std::string AvgPool2d::extra_repr() const { return pool_repr(kernel_size, stride, padding); }
Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, {kernel_size, kernel_size}, std::array<int64_t, 2>{stride, stride}, {padding, padding});
}

std::string AdaptiveAvgPool2d::extra_repr() const {
  return "output_size=(" + std::to_string(output_size[0]) + ", " + std::to_string(output_size[1]) + ")";
}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, output_size); }

}  // namespace ember::nn

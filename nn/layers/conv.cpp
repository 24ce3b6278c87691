// Conv2d and pooling layers.
#include "nn/layers/conv.h"

#include <cmath>

#include "nn/conv.h"
#include "nn/init.h"
#include "nn/pooling.h"
#include "tensor/error.h"

namespace ember::nn {

Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, bool with_bias, int64_t g, int64_t d)
    : in_channels(in), out_channels(out), kernel_size(k), stride(s), padding(p), groups(g), dilation(d) {
  if (in <= 0 || out <= 0 || k <= 0 || s <= 0 || p < 0 || g <= 0 || d <= 0 || in % g != 0 || out % g != 0)
    throw ValueError("Conv2d: bad arguments in=" + std::to_string(in) + " out=" + std::to_string(out) +
                     " kernel=" + std::to_string(k) + " stride=" + std::to_string(s) + " padding=" +
                     std::to_string(p) + " groups=" + std::to_string(g) + " dilation=" + std::to_string(d));
  weight = register_parameter("weight", empty({out, in / g, k, k}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::fan_in(weight)));
    init::uniform_(bias, -bound, bound);
  }
}

std::string Conv2d::extra_repr() const {
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) + ", kernel_size=(" +
                  std::to_string(kernel_size) + ", " + std::to_string(kernel_size) + "), stride=(" +
                  std::to_string(stride) + ", " + std::to_string(stride) + ")";
  if (padding) s += ", padding=(" + std::to_string(padding) + ", " + std::to_string(padding) + ")";
  if (groups != 1) s += ", groups=" + std::to_string(groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, {stride, stride}, {padding, padding}, {dilation, dilation}, groups);
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

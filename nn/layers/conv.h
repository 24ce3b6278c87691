// Conv2d and the pooling layers over the functional ops of nn/conv.h and nn/pooling.h.
#pragma once

#include <array>
#include <optional>

#include "nn/module.h"

namespace ember::nn {

// 2-D convolution, weight (out, in/groups, k, k); PyTorch's init as Linear (fan_in = in/groups k k).
class Conv2d : public UnaryModule {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0,
         bool bias = true, int64_t groups = 1, int64_t dilation = 1);
  std::string name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  int64_t in_channels, out_channels, kernel_size, stride, padding, groups, dilation;
  Tensor weight, bias;
};

class MaxPool2d : public UnaryModule {
 public:
  explicit MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride = {}, int64_t padding = 0)
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding) {}
  std::string name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  int64_t kernel_size, stride, padding;
};

class AvgPool2d : public UnaryModule {
 public:
  explicit AvgPool2d(int64_t kernel_size, std::optional<int64_t> stride = {}, int64_t padding = 0)
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding) {}
  std::string name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  int64_t kernel_size, stride, padding;
};

class AdaptiveAvgPool2d : public UnaryModule {
 public:
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> output_size) : output_size(output_size) {}
  explicit AdaptiveAvgPool2d(int64_t output_size) : output_size{output_size, output_size} {}
  std::string name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  std::array<int64_t, 2> output_size;
};

}  // namespace ember::nn

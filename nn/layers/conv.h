/// @file
/// Conv2d, ConvTranspose2d and the pooling layers over the functional ops of nn/conv.h and nn/pooling.h.
#pragma once

#include <array>
#include <optional>

#include "nn/module.h"

namespace ember::nn {

/// 2-D convolution, weight (out, in/groups, k, k); PyTorch's init as Linear (fan_in = in/groups k k).
class Conv2d : public UnaryModule {
 public:
  /// A convolution with a square kernel, stride, padding and dilation; ValueError for a size that is
  /// not positive (padding: negative) or channel counts that groups does not divide.
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0,
         bool bias = true, int64_t groups = 1, int64_t dilation = 1);
  std::string name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  void reset_parameters();  ///< Draws weight and bias again with PyTorch's init.

  /// the constructor's arguments @{
  int64_t in_channels, out_channels, kernel_size, stride, padding, groups, dilation;
  /// @}
  /// weight (out, in/groups, k, k), bias (out) or undefined @{
  Tensor weight, bias;
  /// @}
 protected:
  Tensor forward(const Tensor& x) override;
};

/// 2-D transposed convolution, weight (in, out/groups, k, k); PyTorch's init, whose fan_in is the
/// weight's second dim times k k.
class ConvTranspose2d : public UnaryModule {
 public:
  /// A transposed convolution with a square kernel, stride, padding, output_padding and dilation, in
  /// PyTorch's argument order; ValueError for a size that is not positive (padding, output_padding:
  /// negative), an output_padding not below the stride or the dilation, or channel counts that groups
  /// does not divide.
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
                  int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, bool bias = true,
                  int64_t dilation = 1);
  std::string name() const override { return "ConvTranspose2d"; }
  std::string extra_repr() const override;
  void reset_parameters();  ///< Draws weight and bias again with PyTorch's init.

  /// the constructor's arguments @{
  int64_t in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, dilation;
  /// @}
  /// weight (in, out/groups, k, k), bias (out) or undefined @{
  Tensor weight, bias;
  /// @}
 protected:
  Tensor forward(const Tensor& x) override;
};

/// max_pool2d over square windows.
class MaxPool2d : public UnaryModule {
 public:
  /// Windows of kernel_size x kernel_size; stride defaults to kernel_size.
  explicit MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride = {}, int64_t padding = 0)
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding) {}
  std::string name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  /// the constructor's arguments (stride resolved) @{
  int64_t kernel_size, stride, padding;
  /// @}
 protected:
  Tensor forward(const Tensor& x) override;
};

/// avg_pool2d over square windows (padding counted in the divisor).
class AvgPool2d : public UnaryModule {
 public:
  /// Windows of kernel_size x kernel_size; stride defaults to kernel_size.
  explicit AvgPool2d(int64_t kernel_size, std::optional<int64_t> stride = {}, int64_t padding = 0)
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding) {}
  std::string name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  /// the constructor's arguments (stride resolved) @{
  int64_t kernel_size, stride, padding;
  /// @}
 protected:
  Tensor forward(const Tensor& x) override;
};

/// adaptive_avg_pool2d to a fixed output size.
class AdaptiveAvgPool2d : public UnaryModule {
 public:
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> output_size) : output_size(output_size) {}  ///< Output (OH, OW).
  explicit AdaptiveAvgPool2d(int64_t output_size) : output_size{output_size, output_size} {}    ///< Output (n, n).
  std::string name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;
  std::array<int64_t, 2> output_size;  ///< (OH, OW)
 protected:
  Tensor forward(const Tensor& x) override;
};

}  // namespace ember::nn

/// @file
/// conv2d, as torch::nn::functional::conv2d: NCHW input, (O, C/groups, kH, kW) weight, optional bias.
#pragma once

#include <array>

#include "tensor/layout.h"
#include "tensor/ops.h"

namespace ember {

/// 2-D convolution (cross-correlation) with PyTorch's output size
///   OH = (H + 2 pad - dilation (kH - 1) - 1) / stride + 1.
/// An input with channels-last strides (NHWC in memory) is read in place and gives a channels-last output.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, std::array<int64_t, 2> stride = {1, 1},
              std::array<int64_t, 2> padding = {0, 0}, std::array<int64_t, 2> dilation = {1, 1}, int64_t groups = 1);

/// conv2d's padding by name, as PyTorch's padding='valid' / 'same'.
enum class PaddingMode {
  valid,  ///< no padding
  same,   ///< the output as large as the input (stride 1 only)
};

/// conv2d padded by name. "same" pads each spatial dim by dilation (k - 1) in all, half before and
/// half after, the odd element after (bottom, right) for an even extent, as PyTorch does; stride must
/// be 1 there (ValueError otherwise).
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::array<int64_t, 2> stride,
              PaddingMode padding, std::array<int64_t, 2> dilation = {1, 1}, int64_t groups = 1);

/// 2-D transposed convolution, as torch::nn::functional::conv_transpose2d: input (N, C_in, H, W), weight
/// (C_in, C_out/groups, kH, kW), optional bias (C_out). The output size is
///   OH = (H - 1) stride - 2 pad + dilation (kH - 1) + output_padding + 1,
/// and output_padding must be smaller than the stride or the dilation. It is conv2d's gradient with
/// respect to its input, so it runs that kernel (cuDNN's backward-data on CUDA). A channels-last input
/// gives a channels-last output.
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
                        std::array<int64_t, 2> output_padding = {0, 0}, int64_t groups = 1,
                        std::array<int64_t, 2> dilation = {1, 1});

}  // namespace ember

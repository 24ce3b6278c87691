/// @file
/// Pooling front ends, as torch::nn::functional: max_pool2d (with indices), avg_pool2d, adaptive_avg_pool2d.
#pragma once

#include <array>
#include <optional>

#include "tensor/ops.h"

namespace ember {

/// Max over each window (padding counts as -inf); indices are h * W + w within each (n, c) plane.
/// stride defaults to kernel. Requires padding <= kernel / 2.
ValuesIndices max_pool2d_with_indices(const Tensor& input, std::array<int64_t, 2> kernel,
                                      std::optional<std::array<int64_t, 2>> stride = {},
                                      std::array<int64_t, 2> padding = {0, 0},
                                      std::array<int64_t, 2> dilation = {1, 1}, bool ceil_mode = false);
/// The values of max_pool2d_with_indices.
Tensor max_pool2d(const Tensor& input, std::array<int64_t, 2> kernel, std::optional<std::array<int64_t, 2>> stride = {},
                  std::array<int64_t, 2> padding = {0, 0}, std::array<int64_t, 2> dilation = {1, 1},
                  bool ceil_mode = false);

/// Mean over each window; count_include_pad divides by the padded window size (PyTorch's default).
/// divisor_override, when given, divides every window's sum by it instead (ValueError for 0).
Tensor avg_pool2d(const Tensor& input, std::array<int64_t, 2> kernel, std::optional<std::array<int64_t, 2>> stride = {},
                  std::array<int64_t, 2> padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = {});

/// Mean over windows [floor(i H / OH), ceil((i + 1) H / OH)) (and likewise along W).
Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size);

}  // namespace ember

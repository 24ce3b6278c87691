// The pooling primitives: max pooling (values and i64 indices) and average pooling, regular or
// adaptive, with average pooling's backward as a primitive of its own (each is the other's vjp).
#pragma once

#include <array>

#include "nn/primitives/window.h"
#include "tensor/primitive.h"

namespace ember {

struct Pool2dParams {
  Pair kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;
  int64_t divisor_override = 0;  // avg_pool2d: each window's sum divided by this when not 0
  bool adaptive = false;  // adaptive_avg_pool2d: windows from output_size, the other fields unused
  Pair output_size{1, 1};
  // The input was stored channels-last: the front ends and the vjps hand their results on in that
  // layout (the kernels write NCHW), so a channels-last network stays so past its pooling.
  bool channels_last = false;
};

// The output size of pooling `in` (PyTorch's pooling_output_shape).
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode);

// Input {x (N, C, H, W)}: outputs {values (N, C, OH, OW), indices (i64, h * W + w within each plane)}.
// Padding acts as -inf; NaN wins; ties go to the first position in row-major order.
class MaxPool2d final : public Primitive {
 public:
  static constexpr int kSaves = kSaveOutputs;
  explicit MaxPool2d(Pool2dParams p) : p_(p) {}
  const char* name() const override { return "max_pool2d"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Pool2dParams p_;
};

// Input {x (N, C, H, W)}: the window means (N, C, OH, OW).
class AvgPool2d final : public Primitive {
 public:
  explicit AvgPool2d(Pool2dParams p) : p_(p) {}
  const char* name() const override { return p_.adaptive ? "adaptive_avg_pool2d" : "avg_pool2d"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Pool2dParams p_;
};

// Input {grad_out (N, C, OH, OW)}: the gradient of AvgPool2d's input, (N, C, H, W).
class AvgPool2dBackward final : public Primitive {
 public:
  AvgPool2dBackward(Pool2dParams p, Pair input_hw) : p_(p), input_hw_(input_hw) {}
  const char* name() const override { return p_.adaptive ? "adaptive_avg_pool2d_backward" : "avg_pool2d_backward"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Pool2dParams p_;
  Pair input_hw_;
};

}  // namespace ember

// The conv2d primitives: the forward and its two backward halves (input and weight), each with its
// own kernel. Bias is not a primitive's business: the front end adds it as a broadcast add.
#pragma once

#include <array>
#include <cstddef>

#include "nn/primitives/window.h"
#include "tensor/primitive.h"

namespace ember {

struct Conv2dParams {
  Pair stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};

// Whether CPU conv2d runs on oneDNN, as PyTorch's does, where ember was built with it (Meson option
// dnnl) and it takes the dtype (f32; bf16 on CPUs with avx512_bf16). On by default; the environment
// variable EMBER_CPU_CONV=ember starts it off, for comparing. Off: ember's own im2col + GEMM kernel
// (cpu/conv.cpp), which the deterministic mode always runs. cpu_conv_dnnl() is false without oneDNN.
void set_cpu_conv_dnnl(bool on);
bool cpu_conv_dnnl();

// The number of oneDNN conv primitives cached (one per pass, dtype, shapes, strides, parameters and
// thread count that oneDNN runs; always 0 without oneDNN).
size_t cpu_conv_dnnl_cache_size();

// Inputs {input (N, C, H, W), weight (O, C/groups, kH, kW)}: out (N, O, OH, OW), or (N, OH, OW, O)
// when channels_last (the front end permutes it back to an NCHW-shaped view with NHWC strides).
class Conv2d final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  Conv2d(Conv2dParams p, bool channels_last) : p_(p), channels_last_(channels_last) {}
  const char* name() const override { return "conv2d"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Conv2dParams p_;
  bool channels_last_;
};

// Inputs {grad_out (N, O, OH, OW), weight}: the gradient of conv2d's input, of shape input_shape
// (N, C, H, W), or (N, H, W, C) when channels_last. Bilinear, so its vjp is conv2d and the weight half.
class Conv2dBackwardInput final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  Conv2dBackwardInput(Conv2dParams p, Shape input_shape, bool channels_last)
      : p_(p), input_shape_(input_shape), channels_last_(channels_last) {}
  const char* name() const override { return "conv2d_backward_input"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Conv2dParams p_;
  Shape input_shape_;  // NCHW
  bool channels_last_;
};

// Inputs {grad_out (N, O, OH, OW), input (N, C, H, W)}: the gradient of conv2d's weight, of shape weight_shape.
class Conv2dBackwardWeight final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  Conv2dBackwardWeight(Conv2dParams p, Shape weight_shape) : p_(p), weight_shape_(weight_shape) {}
  const char* name() const override { return "conv2d_backward_weight"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Conv2dParams p_;
  Shape weight_shape_;
};

}  // namespace ember

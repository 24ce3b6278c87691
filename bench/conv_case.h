// One conv2d case of bench_conv: a ResNet-50 layer at a batch size, in a layout and a direction.
// Its name carries the whole problem ("32x64x56x56-64x3x3-s1p1/nhwc/fwd"), which
// bench/torch_compare.py parses back to time the same convolution in PyTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/precision.h"
#include "nn/primitives/conv.h"
#include "tensor/tensor.h"

namespace bench {

enum class ConvPass { fwd, bwd_data, bwd_filter };

struct ConvCase {
  int64_t n = 1, c = 0, h = 0, w = 0;  // input (N, C, H, W)
  int64_t o = 0, k = 1;                // weight (O, C, k, k)
  int64_t stride = 1, pad = 0;
  bool nhwc = false;
  ConvPass pass = ConvPass::fwd;
  std::string source;  // the ResNet-50 layer

  int64_t out_h() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - k) / stride + 1; }
  ember::Conv2dParams params() const { return {{stride, stride}, {pad, pad}, {1, 1}, 1}; }
  // Each pass is one GEMM of this size (2 N O OH OW C k k).
  double flop() const { return 2.0 * static_cast<double>(n) * o * out_h() * out_w() * c * k * k; }
};

// The operands of a case, random: x (N, C, H, W), w (O, C, k, k) and the output gradient dy
// (N, O, OH, OW), each NCHW-shaped with channels-last strides when the case is NHWC.
struct ConvTensors {
  ember::Tensor x, w, dy;
};
ConvTensors make_conv_tensors(const ConvCase& c, ember::TensorOptions opts);

// ember's conv2d pass of the case: the front end for fwd, the backward primitives that
// conv2d's vjp runs for bwd_data and bwd_filter.
ember::Tensor ember_conv_pass(const ConvCase& c, const ConvTensors& t);

// The ResNet-50 layers (each pass, each layout when `both_layouts`, else NCHW) at batch n.
std::vector<ConvCase> resnet50_conv_cases(int64_t n, bool both_layouts);

// "conv/<device>/<precision>/<N>x<C>x<H>x<W>-<O>x<k>x<k>-s<stride>p<pad>/<nchw|nhwc>/<fwd|bwd_data|bwd_filter>".
std::string conv_case_name(const char* device, Precision p, const ConvCase& c);

}  // namespace bench

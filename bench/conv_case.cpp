// The conv2d shapes of bench_conv: ResNet-50 (He et al. 2015, Table 1; torchvision's v1.5, whose
// stride sits on the 3x3) on 224x224 images: the stem, and per stage the stride-1 3x3 and the 1x1
// expand, which most of its FLOPs run through.
#include "bench/conv_case.h"

#include "nn/conv.h"
#include "tensor/ops.h"
#include "tensor/primitive.h"

namespace bench {

std::vector<ConvCase> resnet50_conv_cases(int64_t n, bool both_layouts) {
  struct Layer {
    int64_t c, hw, o, k, stride, pad;
    const char* source;
  };
  const Layer layers[] = {
      {3, 224, 64, 7, 2, 3, "resnet50 conv1"},
      {64, 56, 64, 3, 1, 1, "resnet50 layer1 3x3"},     {64, 56, 256, 1, 1, 0, "resnet50 layer1 1x1 expand"},
      {128, 28, 128, 3, 1, 1, "resnet50 layer2 3x3"},   {128, 28, 512, 1, 1, 0, "resnet50 layer2 1x1 expand"},
      {256, 14, 256, 3, 1, 1, "resnet50 layer3 3x3"},   {256, 14, 1024, 1, 1, 0, "resnet50 layer3 1x1 expand"},
      {512, 7, 512, 3, 1, 1, "resnet50 layer4 3x3"},    {512, 7, 2048, 1, 1, 0, "resnet50 layer4 1x1 expand"},
  };
  std::vector<ConvCase> cases;
  for (const Layer& l : layers)
    for (bool nhwc : {false, true}) {
      if (nhwc && !both_layouts) continue;
      for (ConvPass pass : {ConvPass::fwd, ConvPass::bwd_data, ConvPass::bwd_filter})
        cases.push_back({n, l.c, l.hw, l.hw, l.o, l.k, l.stride, l.pad, nhwc, pass, l.source});
    }
  return cases;
}

ConvTensors make_conv_tensors(const ConvCase& c, ember::TensorOptions opts) {
  // An NHWC-contiguous tensor seen as NCHW: permute (0, 3, 1, 2) of (N, H, W, C).
  auto make = [&](int64_t n, int64_t ch, int64_t h, int64_t w) {
    return c.nhwc ? ember::permute(ember::randn({n, h, w, ch}, opts), {0, 3, 1, 2}) : ember::randn({n, ch, h, w}, opts);
  };
  return {make(c.n, c.c, c.h, c.w), make(c.o, c.c, c.k, c.k), make(c.n, c.o, c.out_h(), c.out_w())};
}

ember::Tensor ember_conv_pass(const ConvCase& c, const ConvTensors& t) {
  const ember::Conv2dParams p = c.params();
  switch (c.pass) {
    case ConvPass::fwd: return ember::conv2d(t.x, t.w, {}, p.stride, p.padding);
    case ConvPass::bwd_data: return ember::run1(ember::Conv2dBackwardInput{p, t.x.shape(), c.nhwc}, {t.dy, t.w});
    case ConvPass::bwd_filter: return ember::run1(ember::Conv2dBackwardWeight{p, t.w.shape()}, {t.dy, t.x});
  }
  return {};
}

std::string conv_case_name(const char* device, Precision p, const ConvCase& c) {
  auto s = [](int64_t v) { return std::to_string(v); };
  const char* pass = c.pass == ConvPass::fwd ? "fwd" : c.pass == ConvPass::bwd_data ? "bwd_data" : "bwd_filter";
  return std::string("conv/") + device + "/" + precision_name(p) + "/" + s(c.n) + "x" + s(c.c) + "x" + s(c.h) + "x" +
         s(c.w) + "-" + s(c.o) + "x" + s(c.k) + "x" + s(c.k) + "-s" + s(c.stride) + "p" + s(c.pad) + "/" +
         (c.nhwc ? "nhwc" : "nchw") + "/" + pass;
}

}  // namespace bench

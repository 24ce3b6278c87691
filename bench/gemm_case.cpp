// The GEMM shapes of bench_gemm. Training shapes at batch 32, each layer's forward and its two
// backward GEMMs (PyTorch's layout: a linear layer y = x W^T with W stored (out, in)):
//   forward   y  (M x N) = x (M x K) @ W^T         -> m=M, n=N, k=K, B transposed
//   dgrad     dx (M x K) = dy (M x N) @ W          -> m=M, n=K, k=N
//   wgrad     dW (N x K) = dy^T (M x N stored) @ x -> m=N, n=K, k=M, A transposed
// A convolution is the same GEMM with M = batch * OH * OW and K = C * kh * kw (implicit GEMM).
#include "bench/gemm_case.h"

#include <map>
#include <tuple>

namespace bench {

namespace {

constexpr int64_t kBatch = 32;

// A layer as a GEMM of its forward pass: rows M, out features N, in features K.
struct Layer {
  std::string name;
  int64_t m, n, k;
};

// ResNet-50 (He et al. 2015, Table 1; torchvision's layout) on 224x224 images: the stem, then per
// stage the bottleneck's 1x1 reduce, 3x3, 1x1 expand and the first block's 1x1 projection, and the
// classifier. Later blocks repeat these shapes, with the reduce reading 4*width channels.
std::vector<Layer> resnet50_layers() {
  std::vector<Layer> layers = {{"resnet50 conv1 7x7", kBatch * 112 * 112, 64, 3 * 7 * 7}};
  struct Stage {
    const char* name;
    int64_t hw, width, in;  // output side, bottleneck width, input channels of the first block
  };
  for (const Stage& s : {Stage{"layer1", 56, 64, 64}, Stage{"layer2", 28, 128, 256}, Stage{"layer3", 14, 256, 512},
                         Stage{"layer4", 7, 512, 1024}}) {
    const int64_t m = kBatch * s.hw * s.hw;
    for (const auto& [what, n, k] : std::vector<std::tuple<const char*, int64_t, int64_t>>{
             {"1x1 reduce", s.width, 4 * s.width},
             {"3x3", s.width, s.width * 9},
             {"1x1 expand", 4 * s.width, s.width},
             {"1x1 projection", 4 * s.width, s.in}}) {
      layers.push_back({std::string("resnet50 ") + s.name + " " + what, m, n, k});
    }
  }
  layers.push_back({"resnet50 fc", kBatch, 1000, 2048});
  return layers;
}

// ViT-B/16 (Dosovitskiy et al. 2020, Table 1: hidden 768, MLP 3072, 12 heads) on 224x224 images:
// 196 patches + the class token = 197 tokens per image.
constexpr int64_t kTokens = kBatch * 197;
std::vector<Layer> vit_b16_layers() {
  return {{"vit_b16 patch embed", kBatch * 196, 768, 3 * 16 * 16},
          {"vit_b16 qkv", kTokens, 3 * 768, 768},
          {"vit_b16 attn proj", kTokens, 768, 768},
          {"vit_b16 mlp fc1", kTokens, 3072, 768},
          {"vit_b16 mlp fc2", kTokens, 768, 3072},
          {"vit_b16 head", kBatch, 1000, 768}};
}

}  // namespace

std::string GemmCase::size_name() const {
  if (source == "square") return std::to_string(m);
  std::string s = batch > 1 ? std::to_string(batch) + "x" : "";
  s += std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + "/";
  s += a_transposed ? 't' : 'n';
  s += b_transposed ? 't' : 'n';
  return s;
}

std::vector<GemmCase> gemm_cases(const std::vector<int64_t>& square_sizes) {
  std::vector<GemmCase> cases;
  for (int64_t n : square_sizes) cases.push_back({1, n, n, n, false, false, "square"});
  // Training GEMMs, one case per distinct problem.
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool>, size_t> seen;
  auto add = [&](const GemmCase& c) {
    const auto key = std::make_tuple(c.m, c.n, c.k, c.a_transposed, c.b_transposed);
    if (const auto it = seen.find(key); it != seen.end()) {
      cases[it->second].source += ", " + c.source;
      return;
    }
    seen.emplace(key, cases.size());
    cases.push_back(c);
  };
  for (const auto& layers : {resnet50_layers(), vit_b16_layers()}) {
    for (const Layer& l : layers) {
      add({1, l.m, l.n, l.k, false, true, l.name + " fwd"});
      add({1, l.m, l.k, l.n, false, false, l.name + " dgrad"});
      add({1, l.n, l.k, l.m, true, false, l.name + " wgrad"});
    }
  }
  // Attention of ViT-B/16: per (image, head), scores = Q K^T (197 x 64 @ 64 x 197), then P @ V.
  const int64_t heads = kBatch * 12;
  cases.push_back({heads, 197, 197, 64, false, true, "vit_b16 attention Q K^T"});
  cases.push_back({heads, 197, 64, 197, false, false, "vit_b16 attention P V"});
  return cases;
}

std::string gemm_case_name(const char* device, Precision p, const GemmCase& c) {
  return std::string("gemm/") + device + "/" + precision_name(p) + "/" + c.size_name();
}

}  // namespace bench

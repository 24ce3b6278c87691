// Vision Transformer (ViT): patch embedding (Conv2d patch x patch, stride patch), class token,
// learned position embedding, pre-norm blocks (MultiheadAttention + GELU MLP), final LayerNorm, head.
// Module names follow timm where ember's layers allow (patch_embed.proj, cls_token, pos_embed,
// blocks.i.norm1/attn/norm2/mlp.fc1/mlp.fc2, norm, head); attention uses PyTorch's MHA names.
#pragma once

#include "nn/layers/attention.h"
#include "nn/layers/conv.h"
#include "nn/layers/normalization.h"

namespace ember::nn {

struct ViTOptions {
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t in_channels = 3;
  int64_t num_classes = 1000;
  int64_t embed_dim = 768;
  int64_t depth = 12;
  int64_t num_heads = 12;
  double mlp_ratio = 4.0;
  double eps = 1e-6;  // LayerNorm eps as timm's ViT
};

class PatchEmbed : public UnaryModule {
 public:
  PatchEmbed(int64_t image_size, int64_t patch_size, int64_t in_channels, int64_t embed_dim);
  std::string name() const override { return "PatchEmbed"; }
  Tensor forward(const Tensor& x) override;  // (B, C, H, W) -> (B, N, E)
  int64_t num_patches;
  std::shared_ptr<Conv2d> proj;
};

class ViTMlp : public UnaryModule {
 public:
  ViTMlp(int64_t dim, int64_t hidden);
  std::string name() const override { return "Mlp"; }
  Tensor forward(const Tensor& x) override { return (*fc2)((*act)((*fc1)(x))); }
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<GELU> act;
};

class ViTBlock : public UnaryModule {
 public:
  ViTBlock(int64_t dim, int64_t heads, double mlp_ratio, double eps);
  std::string name() const override { return "Block"; }
  Tensor forward(const Tensor& x) override;  // x + attn(norm1(x)), then + mlp(norm2(.))
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<MultiheadAttention> attn;
  std::shared_ptr<ViTMlp> mlp;
};

class VisionTransformer : public UnaryModule {
 public:
  explicit VisionTransformer(const ViTOptions& opts = {});
  std::string name() const override { return "VisionTransformer"; }
  Tensor forward(const Tensor& x) override;  // (B, C, H, W) -> (B, num_classes)

  ViTOptions options;
  std::shared_ptr<PatchEmbed> patch_embed;
  Tensor cls_token, pos_embed;  // (1, 1, E), (1, N + 1, E)
  std::shared_ptr<ModuleList> blocks;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Linear> head;
};

// Presets (width/depth/heads): tiny 192/12/3, small 384/12/6, base 768/12/12; the other fields
// come from `opts` (patch 16, image 224 by default).
std::shared_ptr<VisionTransformer> vit_tiny(ViTOptions opts = {});
std::shared_ptr<VisionTransformer> vit_small(ViTOptions opts = {});
std::shared_ptr<VisionTransformer> vit_base(ViTOptions opts = {});

}  // namespace ember::nn

/// @file
/// Vision Transformer (ViT): patch embedding (Conv2d patch x patch, stride patch), class token,
/// learned position embedding, pre-norm blocks (MultiheadAttention + GELU MLP), final LayerNorm, head.
/// Module names follow timm where ember's layers allow (patch_embed.proj, cls_token, pos_embed,
/// blocks.i.norm1/attn/norm2/mlp.fc1/mlp.fc2, norm, head); attention uses PyTorch's MHA names.
#pragma once

#include "nn/layers/attention.h"
#include "nn/layers/conv.h"
#include "nn/layers/normalization.h"

namespace ember::nn {

/// The shape of a VisionTransformer (defaults: ViT-B/16 at 224 pixels).
struct ViTOptions {
  int64_t image_size = 224;    ///< side of the square input images
  int64_t patch_size = 16;     ///< side of a patch; must divide image_size
  int64_t in_channels = 3;     ///< channels of the input images
  int64_t num_classes = 1000;  ///< outputs of the head
  int64_t embed_dim = 768;     ///< width E of every token
  int64_t depth = 12;          ///< number of blocks
  int64_t num_heads = 12;      ///< attention heads per block
  double mlp_ratio = 4.0;      ///< hidden width of each block's MLP, in units of E
  double eps = 1e-6;           ///< LayerNorm eps as timm's ViT
};

/// Cuts images into patches and projects each to a token of E (timm's PatchEmbed).
class PatchEmbed : public UnaryModule {
 public:
  /// ValueError when patch_size does not divide image_size.
  PatchEmbed(int64_t image_size, int64_t patch_size, int64_t in_channels, int64_t embed_dim);
  std::string name() const override { return "PatchEmbed"; }
  int64_t num_patches;                       ///< N = (image_size / patch_size)^2
  std::shared_ptr<Conv2d> proj;              ///< Conv2d patch x patch with stride patch
 protected:
  Tensor forward(const Tensor& x) override;  ///< (B, C, H, W) -> (B, N, E)
  /// replace_module: a child may become another module of its type.
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

/// A block's MLP: fc1, GELU, fc2 (timm's Mlp).
class ViTMlp : public UnaryModule {
 public:
  ViTMlp(int64_t dim, int64_t hidden);  ///< From dim to hidden and back.
  std::string name() const override { return "Mlp"; }
  /// dim to hidden, hidden to dim @{
  std::shared_ptr<Linear> fc1, fc2;
  /// @}
  std::shared_ptr<GELU> act;  ///< exact GELU
 protected:
  Tensor forward(const Tensor& x) override { return (*fc2)((*act)((*fc1)(x))); }  ///< fc2(act(fc1(x))).
  /// replace_module: a child may become another module of its type.
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

/// A pre-norm transformer block (timm's Block).
class ViTBlock : public UnaryModule {
 public:
  /// Width dim, `heads` attention heads, an MLP of mlp_ratio x dim, LayerNorm eps.
  ViTBlock(int64_t dim, int64_t heads, double mlp_ratio, double eps);
  std::string name() const override { return "Block"; }
  /// before attention, before the MLP @{
  std::shared_ptr<LayerNorm> norm1, norm2;
  /// @}
  std::shared_ptr<MultiheadAttention> attn;  ///< self-attention
  std::shared_ptr<ViTMlp> mlp;               ///< the MLP
 protected:
  Tensor forward(const Tensor& x) override;  ///< x + attn(norm1(x)), then + mlp(norm2(.))
  /// replace_module: a child may become another module of its type.
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

/// ViT (Dosovitskiy et al., 2021) as timm builds it (see the file's description); classifies from
/// the class token.
class VisionTransformer : public UnaryModule {
 public:
  explicit VisionTransformer(const ViTOptions& opts = {});  ///< ValueError when patch_size does not divide image_size.
  std::string name() const override { return "VisionTransformer"; }

  ViTOptions options;                       ///< the options it was built with
  std::shared_ptr<PatchEmbed> patch_embed;  ///< images to tokens
  /// (1, 1, E), (1, N + 1, E) @{
  Tensor cls_token, pos_embed;
  /// @}
  std::shared_ptr<ModuleList> blocks;  ///< the ViTBlocks, in order
  std::shared_ptr<LayerNorm> norm;     ///< the final LayerNorm
  std::shared_ptr<Linear> head;        ///< the classifier on the class token
 protected:
  Tensor forward(const Tensor& x) override;  ///< (B, C, H, W) -> (B, num_classes)
  /// replace_module: a child may become another module of its type.
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

/// ViT-Ti: width 192, depth 12, 3 heads. The presets set embed_dim, depth and num_heads (small
/// 384/12/6, base 768/12/12); the other fields come from `opts` (patch 16, image 224 by default).
std::shared_ptr<VisionTransformer> vit_tiny(ViTOptions opts = {});
std::shared_ptr<VisionTransformer> vit_small(ViTOptions opts = {});  ///< ViT-S: width 384, depth 12, 6 heads.
std::shared_ptr<VisionTransformer> vit_base(ViTOptions opts = {});   ///< ViT-B: width 768, depth 12, 12 heads.

}  // namespace ember::nn

// VisionTransformer.
#include "nn/models/vit.h"

#include "nn/init.h"
#include "tensor/error.h"

namespace ember::nn {

PatchEmbed::PatchEmbed(int64_t image_size, int64_t patch, int64_t in_channels, int64_t embed_dim) {
  if (patch <= 0 || image_size % patch != 0)
    throw ValueError("PatchEmbed: image_size " + std::to_string(image_size) + " is not a multiple of patch_size " +
                     std::to_string(patch));
  num_patches = (image_size / patch) * (image_size / patch);
  proj = register_module("proj", std::make_shared<Conv2d>(in_channels, embed_dim, patch, patch));
}

Tensor PatchEmbed::forward(const Tensor& x) {
  return flatten((*proj)(x), 2).transpose(1, 2);  // (B, E, h, w) -> (B, h*w, E)
}

void PatchEmbed::rebind_child(const std::string& n, const std::shared_ptr<Module>& m) {
  if (!rebind(n, "proj", m, proj)) Module::rebind_child(n, m);
}

ViTMlp::ViTMlp(int64_t dim, int64_t hidden) {
  fc1 = register_module("fc1", std::make_shared<Linear>(dim, hidden));
  act = register_module("act", std::make_shared<GELU>());
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, dim));
}

void ViTMlp::rebind_child(const std::string& n, const std::shared_ptr<Module>& m) {
  if (!(rebind(n, "fc1", m, fc1) || rebind(n, "act", m, act) || rebind(n, "fc2", m, fc2))) Module::rebind_child(n, m);
}

ViTBlock::ViTBlock(int64_t dim, int64_t heads, double mlp_ratio, double eps) {
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(dim, eps));
  attn = register_module("attn", std::make_shared<MultiheadAttention>(dim, heads));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(dim, eps));
  mlp = register_module("mlp", std::make_shared<ViTMlp>(dim, static_cast<int64_t>(dim * mlp_ratio)));
}

Tensor ViTBlock::forward(const Tensor& x) {
  Tensor y = x + (*attn)((*norm1)(x));
  return y + (*mlp)((*norm2)(y));
}

void ViTBlock::rebind_child(const std::string& n, const std::shared_ptr<Module>& m) {
  if (!(rebind(n, "norm1", m, norm1) || rebind(n, "attn", m, attn) || rebind(n, "norm2", m, norm2) ||
        rebind(n, "mlp", m, mlp)))
    Module::rebind_child(n, m);
}

VisionTransformer::VisionTransformer(const ViTOptions& o) : options(o) {
  const int64_t E = o.embed_dim;
  patch_embed = register_module("patch_embed", std::make_shared<PatchEmbed>(o.image_size, o.patch_size, o.in_channels, E));
  cls_token = register_parameter("cls_token", zeros({1, 1, E}));
  pos_embed = register_parameter("pos_embed", zeros({1, patch_embed->num_patches + 1, E}));
  blocks = register_module("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < o.depth; ++i) blocks->push_back(std::make_shared<ViTBlock>(E, o.num_heads, o.mlp_ratio, o.eps));
  norm = register_module("norm", std::make_shared<LayerNorm>(E, o.eps));
  head = register_module("head", std::make_shared<Linear>(E, o.num_classes));
  // timm: position embedding trunc_normal_(std 0.02), class token normal_(std 1e-6).
  init::trunc_normal_(pos_embed, 0.0, 0.02, -0.04, 0.04);
  init::normal_(cls_token, 0.0, 1e-6);
}

Tensor VisionTransformer::forward(const Tensor& x) {
  Tensor t = (*patch_embed)(x);  // (B, N, E)
  const int64_t B = t.size(0);
  if (t.size(1) + 1 != pos_embed.size(1))
    throw ShapeError("VisionTransformer: input " + to_string(x.shape()) + " gives " + std::to_string(t.size(1)) +
                     " patches, the model was built for " + std::to_string(pos_embed.size(1) - 1));
  t = cat({expand(cls_token, {B, 1, options.embed_dim}), t}, 1) + pos_embed;  // (B, N + 1, E)
  for (size_t i = 0; i < blocks->size(); ++i) t = (*blocks->at<UnaryModule>(i))(t);  // a replaced block: any UnaryModule
  t = (*norm)(t);
  return (*head)(select(t, 1, 0));  // the class token
}

void VisionTransformer::rebind_child(const std::string& n, const std::shared_ptr<Module>& m) {
  if (!(rebind(n, "patch_embed", m, patch_embed) || rebind(n, "blocks", m, blocks) || rebind(n, "norm", m, norm) ||
        rebind(n, "head", m, head)))
    Module::rebind_child(n, m);
}

namespace {
std::shared_ptr<VisionTransformer> preset(ViTOptions o, int64_t dim, int64_t heads) {
  o.embed_dim = dim;
  o.depth = 12;
  o.num_heads = heads;
  return std::make_shared<VisionTransformer>(o);
}
}  // namespace

std::shared_ptr<VisionTransformer> vit_tiny(ViTOptions o) { return preset(o, 192, 3); }
std::shared_ptr<VisionTransformer> vit_small(ViTOptions o) { return preset(o, 384, 6); }
std::shared_ptr<VisionTransformer> vit_base(ViTOptions o) { return preset(o, 768, 12); }

}  // namespace ember::nn

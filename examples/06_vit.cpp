// 06_vit: a Vision Transformer (Dosovitskiy et al. 2021) in a tiny configuration. An image is cut
// into patches, each patch becomes a token (one strided convolution), a class token is put in front
// and a learned position embedding added; pre-norm blocks of self-attention and an MLP mix the
// tokens, and the class token's final state is classified. Self-attention alone does not know the
// order of its tokens (permuting the tokens permutes the output: checked below): the position
// embedding is all that tells the model where a patch was. Trained with the transformer recipe,
// AdamW, linear warmup then cosine decay, and gradients clipped to norm 1 (checked every step),
// on synthetic 3x32x32 images.
//
// Read next: nn/models/vit.cpp (PatchEmbed, ViTBlock, VisionTransformer::forward),
// nn/layers/attention.cpp (MultiheadAttention), nn/attention.cpp (scaled_dot_product_attention,
// one fused flash-attention kernel), optim/clip_grad.h (clip_grad_norm_), optim/adam.cpp (AdamW's
// decoupled weight decay), optim/lr_scheduler.h (LinearLR, CosineAnnealingLR, SequentialLR).
//
//   ninja -C build examples/06_vit && build/examples/06_vit
//   build/examples/06_vit --dim 128 --depth 4 --heads 4 --steps 500
#include <CLI/CLI.hpp>

#include <cstdio>

#include <ember/ember.h>  // all of ember in one include

#include "fit.h"

using namespace ember;
using namespace ember_examples;

namespace {

// The shapes an image goes through, from forward hooks: patches to tokens, then the blocks' input.
void expect_token_shapes(Checks& checks, nn::VisionTransformer& vit, const Tensor& images) {
  const nn::ViTOptions& o = vit.options;
  Shape tokens, block_input;
  auto h1 = vit.patch_embed->register_forward_hook(
      [&](nn::Module&, const Tensor&, const Tensor& out) { tokens = out.shape(); });
  auto h2 = (*vit.blocks)[0]->register_forward_pre_hook(
      [&](nn::Module&, const Tensor& in) { block_input = in.shape(); });
  {
    NoGradGuard no_grad;
    (void)vit(images);
  }
  h1.remove();
  h2.remove();
  const int64_t b = images.size(0), n = (o.image_size / o.patch_size) * (o.image_size / o.patch_size);
  std::printf("images %s -> patch tokens %s -> with the class token %s\n", to_string(images.shape()).c_str(),
              to_string(tokens).c_str(), to_string(block_input).c_str());
  checks.expect(tokens == Shape{b, n, o.embed_dim} && block_input == Shape{b, n + 1, o.embed_dim},
                "a 32x32 image in 4x4 patches is 64 tokens of embed_dim, 65 with the class token");
}

// A block treats its tokens as a set: block(x[:, perm]) = block(x)[:, perm].
void expect_permutation_equivariance(Checks& checks, nn::VisionTransformer& vit) {
  NoGradGuard no_grad;
  auto& block = *std::static_pointer_cast<nn::ViTBlock>((*vit.blocks)[0]);
  const Tensor x = randn({2, 5, vit.options.embed_dim});
  const Tensor perm = from_vector<int64_t>({3, 0, 4, 1, 2}, {5});
  checks.expect(allclose(block(index_select(x, 1, perm)), index_select(block(x), 1, perm), 1e-4, 1e-5),
                "self-attention is blind to token order: permuting a block's input tokens permutes its output");
}

}  // namespace

int main(int argc, char** argv) {
  FitOptions fit_options{.steps = 150, .batch_size = 64, .lr = 2e-3};
  nn::ViTOptions vit_options{.image_size = 32, .patch_size = 4, .in_channels = 3, .num_classes = 10,
                             .embed_dim = 64, .depth = 2, .num_heads = 4, .mlp_ratio = 2.0};
  int64_t warmup = 10;
  CLI::App app{"Step 6 of the example ladder: a tiny Vision Transformer on synthetic 3x32x32 images.", "06_vit"};
  add_fit_options(app, fit_options);
  app.add_option("--dim", vit_options.embed_dim, "embedding width")->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  app.add_option("--depth", vit_options.depth, "transformer blocks")->check(CLI::Range(int64_t{1}, int64_t{64}))
      ->capture_default_str();
  app.add_option("--heads", vit_options.num_heads, "attention heads (must divide --dim)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}))->capture_default_str();
  app.add_option("--warmup", warmup, "steps of linear warmup")->check(CLI::Range(int64_t{0}, int64_t{1000000}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  return run_checked("06_vit", [&](Checks& checks) {
    const ImageData data = synthetic_images({3, 32, 10}, 4096, 1000, fit_options.seed);
    const Device device = Device::parse(fit_options.device);
    manual_seed(fit_options.seed);
    auto vit = std::make_shared<nn::VisionTransformer>(vit_options);
    vit->to(device);
    std::printf("ViT: %lld parameters\n", static_cast<long long>(vit->num_parameters()));
    expect_token_shapes(checks, *vit, data.test->get_batch({0, 1}).images.to(device));
    expect_permutation_equivariance(checks, *vit);

    optim::AdamWOptions adamw;
    adamw.lr = fit_options.lr;
    optim::AdamW opt(vit->parameters(), adamw);
    const int64_t ramp = std::min(warmup, fit_options.steps);
    optim::SequentialLR schedule(opt, {std::make_shared<optim::LinearLR>(opt, 1e-2, 1.0, std::max<int64_t>(ramp, 1)),
                                       std::make_shared<optim::CosineAnnealingLR>(
                                           opt, std::max<int64_t>(fit_options.steps - ramp, 1))},
                                 {ramp});
    bool clipped = true;
    const FitReport report = fit(*vit, data, fit_options, [&](const Tensor& images, const Tensor& labels) {
      opt.zero_grad();
      Tensor loss = cross_entropy((*vit)(images), labels);
      loss.backward();
      optim::clip_grad_norm_(vit->parameters(), 1.0);  // returns the norm before clipping
      clipped = clipped && optim::total_grad_norm(vit->parameters()).item<double>() <= 1.0 + 1e-4;
      opt.step();
      schedule.step();
      return loss;
    });
    expect_learned(checks, report, data.shape.classes);
    checks.expect(clipped, "after clip_grad_norm_(1.0) the gradients' total norm was at most 1 at every step");
  });
}

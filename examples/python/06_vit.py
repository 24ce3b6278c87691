"""06_vit: a Vision Transformer (Dosovitskiy et al. 2021) in a tiny configuration, from Python
(examples/06_vit.cpp's twin). An image is cut into patches, each patch becomes a token (one strided
convolution), a class token is put in front and a learned position embedding added; pre-norm blocks
of self-attention and an MLP mix the tokens, and the class token's final state is classified.
Self-attention alone does not know the order of its tokens (permuting the tokens permutes the
output: checked below): the position embedding is all that tells the model where a patch was.
Trained with the transformer recipe, AdamW, linear warmup then cosine decay, and gradients clipped
to norm 1 (checked every step), on synthetic 3x32x32 images.

Read next: python/ember/nn/models.py (VisionTransformer: timm's names over ember's C++ model; its
children are C++ modules too, so hooks on them run inside the C++ forward),
python/ember/nn/utils.py (clip_grad_norm_, get_total_norm), python/ember/optim/lr_scheduler.py
(LinearLR, CosineAnnealingLR, SequentialLR), then the C++ they call: nn/models/vit.cpp (PatchEmbed,
ViTBlock, VisionTransformer::forward), nn/layers/attention.cpp (MultiheadAttention),
nn/attention.cpp (scaled_dot_product_attention, one fused flash-attention kernel), optim/clip_grad.h,
optim/adam.cpp (AdamW's decoupled weight decay), optim/lr_scheduler.h.

    PYTHONPATH=build/python python3 examples/python/06_vit.py
    PYTHONPATH=build/python python3 examples/python/06_vit.py --dim 128 --depth 4 --heads 4 --steps 500
"""

import argparse

import ember
import ember.nn.functional as F
from ember import nn
from ember.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from ladder_checks import run_checked
from ladder_data import ImageShape, synthetic_images
from ladder_fit import add_fit_options, expect_learned, fit
from ladder_flags import add_number

IMAGE_SIZE, PATCH_SIZE = 32, 4


def expect_token_shapes(checks, vit, images, embed_dim):
    """The shapes an image goes through, from forward hooks: patches to tokens, then the blocks' input."""
    seen = {}
    h1 = vit.patch_embed.register_forward_hook(lambda module, args, output: seen.update(tokens=tuple(output.shape)))
    h2 = vit.blocks[0].register_forward_pre_hook(lambda module, args: seen.update(block_input=tuple(args[0].shape)))
    with ember.no_grad():
        vit(images)
    h1.remove()
    h2.remove()
    b, n = images.shape[0], (IMAGE_SIZE // PATCH_SIZE) ** 2
    print(f"images {tuple(images.shape)} -> patch tokens {seen['tokens']} -> with the class token "
          f"{seen['block_input']}")
    checks.expect(seen["tokens"] == (b, n, embed_dim) and seen["block_input"] == (b, n + 1, embed_dim),
                  "a 32x32 image in 4x4 patches is 64 tokens of embed_dim, 65 with the class token")


def expect_permutation_equivariance(checks, vit, embed_dim):
    """A block treats its tokens as a set: block(x[:, perm]) = block(x)[:, perm]."""
    block = vit.blocks[0]
    x = ember.randn(2, 5, embed_dim)
    perm = ember.tensor([3, 0, 4, 1, 2])
    with ember.no_grad():
        checks.expect(ember.allclose(block(x[:, perm]), block(x)[:, perm], 1e-4, 1e-5), "self-attention is blind to "
                      "token order: permuting a block's input tokens permutes its output")


def main():
    parser = argparse.ArgumentParser(description="Step 6 of the example ladder: a tiny Vision Transformer on "
                                     "synthetic 3x32x32 images.")
    add_fit_options(parser, steps=150, batch_size=64, lr=2e-3)
    add_number(parser, "--dim", int, 1, 4096, 64, "embedding width")
    add_number(parser, "--depth", int, 1, 64, 2, "transformer blocks")
    add_number(parser, "--heads", int, 1, 64, 4, "attention heads, must divide --dim")
    add_number(parser, "--warmup", int, 0, 1_000_000, 10, "steps of linear warmup")
    args = parser.parse_args()

    def body(checks):
        data = synthetic_images(ImageShape(3, IMAGE_SIZE, 10), 4096, 1000, args.seed)
        ember.manual_seed(args.seed)
        vit = nn.models.VisionTransformer(image_size=IMAGE_SIZE, patch_size=PATCH_SIZE, in_channels=3,
                                          num_classes=data.shape.classes, embed_dim=args.dim, depth=args.depth,
                                          num_heads=args.heads, mlp_ratio=2.0).to(args.device)
        print(f"ViT: {sum(p.numel() for p in vit.parameters())} parameters")
        first_two = ember.stack([data.test[i][0] for i in range(2)]).to(args.device)
        expect_token_shapes(checks, vit, first_two, args.dim)
        expect_permutation_equivariance(checks, vit, args.dim)

        opt = ember.optim.AdamW(vit.parameters(), lr=args.lr)
        ramp = min(args.warmup, args.steps)
        schedule = SequentialLR(opt, [LinearLR(opt, start_factor=1e-2, end_factor=1.0, total_iters=max(ramp, 1)),
                                      CosineAnnealingLR(opt, T_max=max(args.steps - ramp, 1))], milestones=[ramp])
        clipped = True

        def step(images, labels):
            nonlocal clipped
            opt.zero_grad()
            loss = F.cross_entropy(vit(images), labels)
            loss.backward()
            nn.utils.clip_grad_norm_(vit.parameters(), 1.0)  # returns the norm before clipping
            clipped = clipped and nn.utils.get_total_norm(vit.parameters()).item() <= 1.0 + 1e-4
            opt.step()
            schedule.step()
            return loss

        expect_learned(checks, fit(vit, data, args, step), data.shape.classes)
        checks.expect(clipped, "after clip_grad_norm_(1.0) the gradients' total norm was at most 1 at every step")

    run_checked("06_vit", body)


if __name__ == "__main__":
    main()

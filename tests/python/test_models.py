"""The built-in models from Python: forward and backward through ember's C++ ResNet and ViT, gradients for
every parameter, the Python tree and state dict mirroring the C++ one, modes reaching the C++ tree."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from conftest import to_numpy


def check_finite_gradients(model, x, classes):
    model.zero_grad()
    logits = model(x)
    assert logits.shape == (x.shape[0], classes)
    loss = F.cross_entropy(logits, ember.arange(x.shape[0]) % classes)
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert missing == []
    bad = [n for n, p in model.named_parameters() if not np.isfinite(to_numpy(p.grad)).all()]
    assert bad == []
    assert any(p.grad.abs().sum().item() > 0 for p in model.parameters())


def test_resnet18_forward_backward_and_names():
    ember.manual_seed(0)
    model = nn.models.resnet18(num_classes=10, small_input=True)
    check_finite_gradients(model, ember.randn(2, 3, 8, 8), 10)
    keys = list(model.state_dict())
    assert sorted(keys) == model.cpp_state_dict_keys()
    assert sorted(n for n, _ in model.named_parameters()) == sorted(n for n, _ in model._cpp.named_parameters())
    # torchvision's names
    for name in ["conv1.weight", "bn1.running_mean", "bn1.num_batches_tracked", "layer1.0.conv1.weight",
                 "layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_var", "fc.weight", "fc.bias"]:
        assert name in keys, name
    assert model.layer2[0].downsample[0].stride == (2, 2)
    assert model.fc.in_features == 512
    assert "maxpool" not in dict(model.named_children())  # small_input: no max pool


def test_vit_tiny_forward_backward_and_names():
    ember.manual_seed(0)
    model = nn.models.vit_tiny(image_size=16, patch_size=8, num_classes=5, depth=2)
    check_finite_gradients(model, ember.randn(2, 3, 16, 16), 5)
    keys = list(model.state_dict())
    assert sorted(keys) == model.cpp_state_dict_keys()
    for name in ["cls_token", "pos_embed", "patch_embed.proj.weight", "blocks.0.norm1.weight",
                 "blocks.1.attn.in_proj_weight", "blocks.1.attn.out_proj.weight", "blocks.0.mlp.fc1.bias",
                 "norm.weight", "head.weight"]:
        assert name in keys, name
    assert model.blocks[1].attn.num_heads == 3 and model.patch_embed.num_patches == 4
    assert model.pos_embed.shape == (1, 5, 192)
    assert (model.embed_dim, model.num_features, model.num_classes, model.num_prefix_tokens) == (192, 192, 5, 1)


def test_the_blocks_are_classes_to_build_and_recognise():
    from ember.nn.models import BasicBlock, Block, Bottleneck, Mlp, PatchEmbed

    # isinstance on a model's parts, as wrap and checkpoint policies do with torchvision's and timm's classes
    assert isinstance(nn.models.resnet18().layer1[0], BasicBlock)
    assert isinstance(nn.models.resnet50().layer4[2], Bottleneck)
    vit = nn.models.vit_tiny(image_size=16, patch_size=8, depth=1)
    assert isinstance(vit.blocks[0], Block) and isinstance(vit.blocks[0].mlp, Mlp)
    assert isinstance(vit.patch_embed, PatchEmbed)

    ember.manual_seed(0)
    down = nn.Sequential(nn.Conv2d(8, 16, 1, stride=2, bias=False), nn.BatchNorm2d(16))
    block = BasicBlock(8, 16, stride=2, downsample=down)
    assert "downsample.0.weight" in block.state_dict() and block.conv1.stride == (2, 2)
    assert block.downsample[0].weight.data_ptr() == down[0].weight.data_ptr()  # the same tensor, not a copy
    x = ember.randn(2, 8, 6, 6, requires_grad=True)
    y = block(x)
    assert y.shape == (2, 16, 3, 3) and y.min().item() >= 0  # the block ends in ReLU
    y.sum().backward()
    assert down[0].weight.grad is not None and x.grad.shape == x.shape
    assert Bottleneck(64, 16)(ember.randn(1, 64, 4, 4)).shape == (1, 64, 4, 4)
    assert Block(32, 4)(ember.randn(2, 5, 32)).shape == (2, 5, 32)
    assert Mlp(8, 32).fc1.out_features == 32 and Mlp(8).fc1.out_features == 8
    assert PatchEmbed(16, 8, 3, 12)(ember.randn(1, 3, 16, 16)).shape == (1, 4, 12)

    with pytest.raises(TypeError, match="holding Tanh"):
        BasicBlock(8, 8, downsample=nn.Sequential(nn.Tanh()))
    with pytest.raises(TypeError, match="got Conv2d"):
        BasicBlock(8, 16, downsample=nn.Conv2d(8, 16, 1))
    with pytest.raises(ember.ValueError, match="num_heads 5"):
        Block(32, 5)
    with pytest.raises(ember.ValueError, match="patch_size 8"):
        PatchEmbed(30, 8)


def test_model_names():
    assert set(nn.models.model_names()) >= {"mlp", "cnn", "resnet18", "resnet34", "resnet50", "vit_tiny"}
    with pytest.raises(ember.ValueError):
        nn.models.ResNet(depth=19)


def test_train_and_eval_reach_the_cpp_batch_norms():
    ember.manual_seed(0)
    model = nn.models.SmallCNN()
    x = ember.randn(4, 1, 28, 28)
    before = model.bn1.running_mean.clone()
    model(x)
    after_train = model.bn1.running_mean.clone()
    assert not after_train.equal(before) and model.bn1.num_batches_tracked.item() == 1
    model.eval()
    assert not model.bn1.training
    with ember.no_grad():
        y1 = model(x)
        y2 = model(x)
    assert model.bn1.running_mean.equal(after_train) and y1.equal(y2)
    model.train()
    assert model.bn1.training


def test_a_built_in_model_inside_a_python_module():
    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.models.SmallCNN(num_classes=8)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            return self.head(self.backbone(x).relu())

    m = Classifier()
    names = [n for n, _ in m.named_parameters()]
    assert names[0] == "backbone.conv1.weight" and names[-1] == "head.bias"
    out = m(ember.randn(2, 1, 28, 28))
    out.sum().backward()
    assert m.backbone.conv2.weight.grad is not None
    # The backbone's checkpoint keys, under its prefix.
    sub = {k[len("backbone."):]: v for k, v in m.state_dict().items() if k.startswith("backbone.")}
    assert sorted(sub) == m.backbone.cpp_state_dict_keys()


def test_activation_checkpointing_of_blocks():
    ember.manual_seed(0)
    model = nn.models.vit_tiny(image_size=16, patch_size=8, num_classes=5, depth=2)
    x = ember.randn(2, 3, 16, 16)
    model(x).sum().backward()
    ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    for block in model.blocks:
        block.set_activation_checkpointing(True)
    model(x).sum().backward()
    for r, p in zip(ref, model.parameters()):
        assert p.grad.equal(r)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_make_model_matches_the_cpp_program(name):
    m = nn.models.make_model(name, 1, 28, 10)
    assert m(ember.randn(2, 1, 28, 28)).shape == (2, 10)
    assert sorted(m.state_dict()) == m.cpp_state_dict_keys()


@pytest.mark.skipif(not ember.cuda.is_available(), reason="no CUDA device")
def test_resnet18_on_cuda_matches_the_cpu():
    ember.manual_seed(0)
    model = nn.models.resnet18(num_classes=10, small_input=True)
    x = ember.randn(2, 3, 8, 8)
    model.eval()
    with ember.no_grad():
        ref = model(x)
        model.cuda()
        assert model.layer1[0].conv1.weight.is_cuda and model.bn1.running_var.is_cuda
        out = model(x.cuda()).cpu()
    np.testing.assert_allclose(to_numpy(out), to_numpy(ref), rtol=1e-3, atol=1e-3)
    model.train()
    check_finite_gradients(model, x.cuda(), 10)

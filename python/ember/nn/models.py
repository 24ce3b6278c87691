"""The built-in models, built and run by ember's C++ (nn/models/*.h): torchvision's ResNet-18/34/50,
timm's ViT (tiny, small, base), SmallCNN and MLP. Each is an ``ember.nn.Module`` whose forward is one
C++ call; its children mirror the C++ tree (``model.layer1[0].conv1``, ``model.blocks[3].attn``) and its
state dict has the C++ names, which are torchvision's and timm's, so the checkpoints of ember's C++
training program (``examples/train``) load by name (``ember.load_checkpoint``)."""

from .._ember import _nn
from .modules import Sequential, _CppModule, _CppSequential, _register_cpp_class

__all__ = [
    "MLP",
    "BasicBlock",
    "Block",
    "Bottleneck",
    "Mlp",
    "PatchEmbed",
    "ResNet",
    "SmallCNN",
    "VisionTransformer",
    "make_model",
    "model_names",
    "resnet18",
    "resnet34",
    "resnet50",
    "vit_base",
    "vit_small",
    "vit_tiny",
]


@_register_cpp_class("ResNet")
class ResNet(_CppModule):
    """torchvision's ResNet of ``depth`` 18, 34 (BasicBlock) or 50 (Bottleneck): stem (conv1, bn1, ReLU,
    maxpool), layer1..4, global average pool, fc. ``small_input`` uses a 3x3 stride-1 stem without
    max pool (CIFAR, 28x28 images)."""

    def __init__(self, depth=18, num_classes=1000, in_channels=3, small_input=False):
        _CppModule.__init__(self, _nn.resnet(depth, num_classes, in_channels, small_input))


def _shortcut(downsample, block):
    """The C++ modules of a block's downsample: None, or a Sequential of ember's built-in layers."""
    if downsample is None:
        return None
    parts = list(downsample) if isinstance(downsample, Sequential) else [downsample]
    others = [type(m).__name__ for m in parts if not isinstance(m, _CppModule)]
    if others or not isinstance(downsample, Sequential):
        raise TypeError(f"{block}: downsample must be None or an ember.nn.Sequential of ember's built-in layers "
                        f"(Conv2d, BatchNorm2d, ...), got {type(downsample).__name__}"
                        + (f" holding {', '.join(others)}" if isinstance(downsample, Sequential) else ""))
    return [m._cpp for m in parts]


@_register_cpp_class("BasicBlock")
class BasicBlock(_CppModule):
    """ResNet-18/34's block, as torchvision's: conv1 (3x3, ``stride``), bn1, ReLU, conv2 (3x3), bn2, plus
    the shortcut (``downsample``, a Sequential such as 1x1 conv and batch norm, where the shape changes),
    then ReLU. From ``inplanes`` to ``planes`` channels."""

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        _CppModule.__init__(self, _nn.resnet_block("basic", inplanes, planes, stride,
                                                   _shortcut(downsample, "BasicBlock")))


@_register_cpp_class("Bottleneck")
class Bottleneck(_CppModule):
    """ResNet-50's block, as torchvision's (v1.5): 1x1 to ``planes``, 3x3 with the ``stride``, 1x1 to
    4 x ``planes``, each with batch norm, plus the shortcut (``downsample``), then ReLU."""

    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        _CppModule.__init__(self, _nn.resnet_block("bottleneck", inplanes, planes, stride,
                                                   _shortcut(downsample, "Bottleneck")))


def resnet18(num_classes=1000, in_channels=3, small_input=False):
    """ResNet-18: BasicBlocks (2, 2, 2, 2)."""
    return ResNet(18, num_classes, in_channels, small_input)


def resnet34(num_classes=1000, in_channels=3, small_input=False):
    """ResNet-34: BasicBlocks (3, 4, 6, 3)."""
    return ResNet(34, num_classes, in_channels, small_input)


def resnet50(num_classes=1000, in_channels=3, small_input=False):
    """ResNet-50: Bottlenecks (3, 4, 6, 3)."""
    return ResNet(50, num_classes, in_channels, small_input)


@_register_cpp_class("VisionTransformer")
class VisionTransformer(_CppModule):
    """ViT as timm builds it (patch_embed.proj, cls_token, pos_embed, blocks.i.{norm1, attn, norm2,
    mlp.fc1, mlp.fc2}, norm, head); classifies from the class token. Defaults: ViT-B/16 at 224."""

    def __init__(self, image_size=224, patch_size=16, in_channels=3, num_classes=1000, embed_dim=768, depth=12,
                 num_heads=12, mlp_ratio=4.0, eps=1e-6):
        _CppModule.__init__(self, _nn.vit(image_size, patch_size, in_channels, num_classes, embed_dim, depth,
                                          num_heads, mlp_ratio, eps))
        # timm's attributes, which code around a ViT reads (a new head's in_features is num_features).
        self.num_classes = num_classes
        self.embed_dim = self.num_features = embed_dim
        self.num_prefix_tokens = 1  # the class token


@_register_cpp_class("PatchEmbed")
class PatchEmbed(_CppModule):
    """timm's PatchEmbed: a ``patch_size`` x ``patch_size`` convolution with that stride (``proj``), its
    output flattened to (B, num_patches, embed_dim)."""

    def __init__(self, img_size=224, patch_size=16, in_chans=3, embed_dim=768):
        _CppModule.__init__(self, _nn.patch_embed(img_size, patch_size, in_chans, embed_dim))


@_register_cpp_class("Mlp")
class Mlp(_CppModule):
    """timm's Mlp of a transformer block: fc1 (``in_features`` to ``hidden_features``), exact GELU, fc2
    back to ``in_features``."""

    def __init__(self, in_features, hidden_features=None):
        _CppModule.__init__(self, _nn.vit_mlp(in_features, hidden_features or in_features))


@_register_cpp_class("Block")
class Block(_CppModule):
    """timm's pre-norm transformer Block of width ``dim``: ``x + attn(norm1(x))``, then
    ``+ mlp(norm2(.))``, with ``num_heads`` heads and an MLP of ``mlp_ratio`` x ``dim``."""

    def __init__(self, dim, num_heads, mlp_ratio=4.0, eps=1e-6):
        _CppModule.__init__(self, _nn.vit_block(dim, num_heads, mlp_ratio, eps))


def vit_tiny(**kwargs):
    """ViT-Ti: width 192, depth 12, 3 heads (other options as VisionTransformer's)."""
    return VisionTransformer(**{**kwargs, "embed_dim": 192, "depth": kwargs.get("depth", 12), "num_heads": 3})


def vit_small(**kwargs):
    """ViT-S: width 384, depth 12, 6 heads."""
    return VisionTransformer(**{**kwargs, "embed_dim": 384, "depth": kwargs.get("depth", 12), "num_heads": 6})


def vit_base(**kwargs):
    """ViT-B: width 768, depth 12, 12 heads."""
    return VisionTransformer(**{**kwargs, "embed_dim": 768, "depth": kwargs.get("depth", 12), "num_heads": 12})


@_register_cpp_class("SmallCNN")
class SmallCNN(_CppModule):
    """conv(3x3, 32)-BN-ReLU-maxpool, conv(3x3, 64)-BN-ReLU-maxpool, fc1 -> 128, ReLU, fc2: the model of
    ember's Fashion-MNIST examples."""

    def __init__(self, num_classes=10, in_channels=1, image_size=28):
        _CppModule.__init__(self, _nn.small_cnn(num_classes, in_channels, image_size))


@_register_cpp_class("MLP")
class MLP(_CppSequential):
    """Linear-ReLU stacks: Linear(in, hidden[0]), ReLU, ..., Linear(hidden[-1], out); children "0", "1", ..."""

    def __init__(self, in_features, hidden, out_features):
        _CppModule.__init__(self, _nn.mlp(in_features, list(hidden), out_features))


def make_model(name, channels, size, classes):
    """The model ember's C++ training program builds under ``name`` (``model_names()``) for images of
    channels x size x size in ``classes`` classes: the same tree and names its checkpoints hold."""
    from .modules import _wrap_cpp

    return _wrap_cpp(_nn.make_model(name, channels, size, classes))


def model_names():
    """The names make_model takes."""
    return list(_nn.model_names())

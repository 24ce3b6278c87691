"""The built-in models, built and run by ember's C++ (nn/models/*.h): torchvision's ResNet-18/34/50,
timm's ViT (tiny, small, base), SmallCNN and MLP. Each is an ``ember.nn.Module`` whose forward is one
C++ call; its children mirror the C++ tree (``model.layer1[0].conv1``, ``model.blocks[3].attn``) and its
state dict has the C++ names, which are torchvision's and timm's, so the checkpoints of ember's C++
training program (``examples/train``) load by name (``ember.load_checkpoint``)."""

from .._ember import _nn
from .modules import _CppModule, _CppSequential, _register_cpp_class

__all__ = [
    "MLP",
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

"""The built-in layers, with PyTorch's constructor arguments. Those ember has in C++ (``Linear``,
``Conv2d``, ``ConvTranspose2d``, ``BatchNorm2d``, ``LayerNorm``, ``Dropout``, ``Embedding``, the pooling layers,
``MultiheadAttention``, the activations) wrap it, so their forward is one C++ call; settings the C++
layer lacks fall back to the functional op (noted per class). The layers ember has no C++ module for
are in composed_layers.py."""

from .. import _ember
from .._ember import _nn
from . import functional as F
from .modules import Module, _CppModule, _register_cpp_class

__all__ = [
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BatchNorm2d",
    "Conv2d",
    "ConvTranspose2d",
    "Dropout",
    "Embedding",
    "Flatten",
    "GELU",
    "Identity",
    "LayerNorm",
    "Linear",
    "MaxPool2d",
    "MultiheadAttention",
    "ReLU",
    "SiLU",
]


def _square(value, name, layer):
    """One int of an int or an (n, n) pair: ember's C++ layers take square windows."""
    if isinstance(value, (tuple, list)):
        if len(value) == 2 and value[0] == value[1]:
            return int(value[0])
        if len(value) == 1:
            return int(value[0])
        raise NotImplementedError(f"{layer}: {name}={tuple(value)} is not square; ember's C++ layer takes one size for both dims")
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise TypeError(f"{layer}: {name} must be an int or an (n, n) pair, got {value!r}")
    return int(value)


def _factory(module, device, dtype):
    """PyTorch's device= and dtype= of a layer's constructor: the parameters moved after construction."""
    if device is not None or dtype is not None:
        module.to(device=device, dtype=dtype)
    return module


@_register_cpp_class("Linear")
class Linear(_CppModule):
    """``y = x W^T + b``, W (out_features, in_features); PyTorch's initialisation."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        _CppModule.__init__(self, _nn.linear(in_features, out_features, bool(bias)))
        _factory(self, device, dtype)


@_register_cpp_class("Conv2d")
class Conv2d(_CppModule):
    """2-D convolution over NCHW input, weight (out, in/groups, k, k). Square kernel, stride,
    padding and dilation (ember's C++ layer); padding may be 'valid' or 'same' (odd kernels)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv2d: padding_mode='{padding_mode}' is not supported (only 'zeros')")
        k = _square(kernel_size, "kernel_size", "Conv2d")
        s = _square(stride, "stride", "Conv2d")
        d = _square(dilation, "dilation", "Conv2d")
        if padding == "valid":
            p = 0
        elif padding == "same":
            if s != 1:
                raise ValueError("Conv2d: padding='same' is not supported for strided convolutions")
            if (d * (k - 1)) % 2:
                raise NotImplementedError("Conv2d: padding='same' with an even kernel pads unevenly; use F.conv2d")
            p = d * (k - 1) // 2
        else:
            p = _square(padding, "padding", "Conv2d")
        _CppModule.__init__(self, _nn.conv2d(in_channels, out_channels, k, s, p, bool(bias), groups, d))
        _factory(self, device, dtype)


def _transposed_output_padding(layer, input, output_size, kernel, stride, padding, dilation):
    """PyTorch's forward(input, output_size): the output_padding that makes each of the last two dims of
    output_size, which must lie between the smallest output and that plus stride - 1."""
    size = tuple(output_size)[-2:]
    if len(size) != 2 or input.dim() != 4:
        raise ValueError(f"{layer}: output_size must end in (H, W) for a 4-D input, got {tuple(output_size)} for "
                         f"input shape {tuple(input.shape)}")
    padding_out = []
    for i in range(2):
        smallest = (input.shape[2 + i] - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1
        if not smallest <= size[i] <= smallest + stride - 1:
            raise ValueError(f"{layer}: output_size {size} is not reachable from input shape {tuple(input.shape)}: "
                             f"dim {i} must be in [{smallest}, {smallest + stride - 1}]")
        padding_out.append(size[i] - smallest)
    return tuple(padding_out)


@_register_cpp_class("ConvTranspose2d")
class ConvTranspose2d(_CppModule):
    """2-D transposed convolution over NCHW input, weight (in, out/groups, k, k): conv2d's gradient with
    respect to its input. Square kernel, stride, padding, output_padding and dilation (ember's C++ layer);
    forward's output_size picks the output_padding, as PyTorch's does."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise NotImplementedError(f"ConvTranspose2d: padding_mode='{padding_mode}' is not supported (only 'zeros')")
        sizes = [_square(v, name, "ConvTranspose2d") for name, v in
                 (("kernel_size", kernel_size), ("stride", stride), ("padding", padding),
                  ("output_padding", output_padding), ("dilation", dilation))]
        k, s, p, op, d = sizes
        _CppModule.__init__(self, _nn.conv_transpose2d(in_channels, out_channels, k, s, p, op, groups, bool(bias), d))
        _factory(self, device, dtype)

    def forward(self, input, output_size=None):
        """The C++ forward; with output_size, the transposed conv whose output has that size."""
        if output_size is None:
            return self._cpp(input)
        k, s, p, d = self.kernel_size[0], self.stride[0], self.padding[0], self.dilation[0]
        output_padding = _transposed_output_padding("ConvTranspose2d", input, output_size, k, s, p, d)
        return F.conv_transpose2d(input, self.weight, self.bias, s, p, output_padding, self.groups, d)


@_register_cpp_class("BatchNorm2d")
class BatchNorm2d(_CppModule):
    """Batch norm over (N, C, H, W) per channel, with running statistics (buffers running_mean,
    running_var, num_batches_tracked) updated in training mode."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        if momentum is None:
            raise NotImplementedError("BatchNorm2d: momentum=None (a cumulative average) is not supported")
        _CppModule.__init__(self, _nn.batch_norm2d(num_features, eps, momentum, affine, track_running_stats))
        _factory(self, device, dtype)


@_register_cpp_class("LayerNorm")
class LayerNorm(_CppModule):
    """Layer norm over the trailing dims ``normalized_shape`` (an int or a shape)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        if not bias and elementwise_affine:
            raise NotImplementedError("LayerNorm: bias=False with elementwise_affine is not supported")
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        _CppModule.__init__(self, _nn.layer_norm(shape, eps, elementwise_affine))
        _factory(self, device, dtype)


@_register_cpp_class("Dropout")
class Dropout(_CppModule):
    """Zeroes elements with probability p in training mode (scaling the rest by 1 / (1 - p))."""

    def __init__(self, p=0.5, inplace=False):
        _CppModule.__init__(self, _nn.dropout(p))


@_register_cpp_class("Embedding")
class Embedding(_CppModule):
    """A lookup table (num_embeddings, embedding_dim) initialised N(0, 1); forward takes integer
    indices. With padding_idx, that row starts at zero and gets no gradient (through F.embedding)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are not supported")
        _CppModule.__init__(self, _nn.embedding(num_embeddings, embedding_dim))
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise ValueError(f"Embedding: padding_idx {padding_idx} is outside [-{num_embeddings}, {num_embeddings})")
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.padding_idx = padding_idx
        if _weight is not None:
            with _ember_no_grad():
                self.weight.copy_(_weight)
        elif padding_idx is not None:
            with _ember_no_grad():
                self.weight[padding_idx].fill_(0)
        if _freeze:
            self.weight.requires_grad_(False)
        _factory(self, device, dtype)

    def forward(self, input):
        """The rows at the integer indices of input."""
        if getattr(self, "padding_idx", None) is None:
            return self._cpp(input)
        return F.embedding(input, self.weight, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None):
        """An Embedding holding a copy of ``embeddings`` (rows, dim)."""
        if embeddings.dim() != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D (rows, dim), got shape "
                             f"{tuple(embeddings.shape)}")
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze)


def _ember_no_grad():
    from ..autograd import no_grad

    return no_grad()


class _PoolFallback:
    # Settings ember's C++ pooling layers lack (dilation, ceil_mode, ...) run through the functional op.
    def forward(self, input):
        if self.__dict__.get("_functional") is None:
            return self._cpp(input)
        return self._functional(input)

    def extra_repr(self):
        """The window settings."""
        if self.__dict__.get("_functional") is None:
            return self._cpp.extra_repr()
        keys = ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "count_include_pad", "divisor_override")
        return ", ".join(f"{k}={self.__dict__[k]}" for k in keys if k in self.__dict__)


@_register_cpp_class("MaxPool2d")
class MaxPool2d(_PoolFallback, _CppModule):
    """Max over square windows; stride defaults to kernel_size. Non-square windows, dilation,
    ceil_mode and return_indices go through F.max_pool2d."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        try:
            k = _square(kernel_size, "kernel_size", "MaxPool2d")
            s = None if stride is None else _square(stride, "stride", "MaxPool2d")
            p = _square(padding, "padding", "MaxPool2d")
            simple = dilation in (1, (1, 1)) and not return_indices and not ceil_mode
        except NotImplementedError:
            simple = False
        if simple:
            _CppModule.__init__(self, _nn.max_pool2d(k, s, p))
            functional = None
        else:
            _CppModule.__init__(self, _nn.identity())

            def functional(x):
                return F.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices)

            self.__dict__.update(kernel_size=kernel_size, stride=stride if stride is not None else kernel_size,
                                 padding=padding)
        self.__dict__.update(_functional=functional, dilation=dilation, ceil_mode=ceil_mode,
                             return_indices=return_indices)


@_register_cpp_class("AvgPool2d")
class AvgPool2d(_PoolFallback, _CppModule):
    """Mean over square windows (padding counted in the divisor); other settings go through
    F.avg_pool2d."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        try:
            k = _square(kernel_size, "kernel_size", "AvgPool2d")
            s = None if stride is None else _square(stride, "stride", "AvgPool2d")
            p = _square(padding, "padding", "AvgPool2d")
            simple = not ceil_mode and count_include_pad and divisor_override is None
        except NotImplementedError:
            simple = False
        if simple:
            _CppModule.__init__(self, _nn.avg_pool2d(k, s, p))
            functional = None
        else:
            _CppModule.__init__(self, _nn.identity())

            def functional(x):
                return F.avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)

            self.__dict__.update(kernel_size=kernel_size, stride=stride if stride is not None else kernel_size,
                                 padding=padding)
        self.__dict__.update(_functional=functional, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                             divisor_override=divisor_override)


@_register_cpp_class("AdaptiveAvgPool2d")
class AdaptiveAvgPool2d(_CppModule):
    """Mean pooling to a fixed output size (an int or a pair)."""

    def __init__(self, output_size):
        size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
        _CppModule.__init__(self, _nn.adaptive_avg_pool2d(size))


@_register_cpp_class("Identity")
class Identity(_CppModule):
    """Returns its input (arguments are accepted and ignored, as PyTorch's)."""

    def __init__(self, *args, **kwargs):
        _CppModule.__init__(self, _nn.identity())


@_register_cpp_class("Flatten")
class Flatten(_CppModule):
    """Merges dims start_dim..end_dim into one (the batch dim kept by default)."""

    def __init__(self, start_dim=1, end_dim=-1):
        _CppModule.__init__(self, _nn.flatten(start_dim, end_dim))


@_register_cpp_class("ReLU")
class ReLU(_CppModule):
    """max(x, 0)."""

    def __init__(self, inplace=False):
        _CppModule.__init__(self, _nn.relu())


@_register_cpp_class("GELU")
class GELU(_CppModule):
    """x * Phi(x), exact (approximate='none') or with the tanh approximation."""

    def __init__(self, approximate="none"):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got '{approximate}'")
        _CppModule.__init__(self, _nn.gelu(approximate == "tanh"))


@_register_cpp_class("SiLU")
class SiLU(_CppModule):
    """x * sigmoid(x)."""

    def __init__(self, inplace=False):
        _CppModule.__init__(self, _nn.silu())


@_register_cpp_class("MultiheadAttention")
class MultiheadAttention(_CppModule):
    """Multi-head attention with PyTorch's parameters (in_proj_weight, in_proj_bias, out_proj). ember's
    layer is batch first; with ``batch_first=False`` (PyTorch's default) inputs (L, B, E) are transposed
    around it. ``dropout`` drops attention weights in training mode; the weights are not returned (the
    second result is None)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if add_bias_kv or add_zero_attn or (kdim not in (None, embed_dim)) or (vdim not in (None, embed_dim)):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn, kdim and vdim are not supported")
        _CppModule.__init__(self, _nn.multihead_attention(embed_dim, num_heads, bias, float(dropout)))
        self.__dict__["batch_first"] = batch_first
        _factory(self, device, dtype)

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """(attention of query over key and value, None). key and value default to query (self-attention);
        masks are bool (True = masked out) or floating (added to the scores)."""
        key = query if key is None else key
        value = key if value is None else value
        if not self.__dict__.get("batch_first", True):
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        mask = attn_mask
        if is_causal and mask is None:
            L, S = query.shape[1], key.shape[1]
            mask = _causal_mask(L, S)
        if key_padding_mask is not None:
            kp = key_padding_mask
            if kp.dtype is not _ember.bool:
                raise NotImplementedError("MultiheadAttention: key_padding_mask must be a bool tensor")
            kp = kp.reshape(kp.shape[0], 1, 1, kp.shape[1])
            mask = kp if mask is None else (mask | kp if mask.dtype is _ember.bool else mask.masked_fill(kp, float("-inf")))
        out = self._cpp.multihead_attention(query, key, value, mask)
        if not self.__dict__.get("batch_first", True):
            out = out.transpose(0, 1)
        return out, None


def _causal_mask(L, S):
    """True above the diagonal: key j > query i is masked out (MultiheadAttention's convention)."""
    i = _ember.arange(L).reshape(L, 1)
    j = _ember.arange(S).reshape(1, S)
    return j > i

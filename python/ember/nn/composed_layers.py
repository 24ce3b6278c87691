"""The layers ember has no C++ module for, with PyTorch's constructor arguments: small Python modules
over ``ember.nn.functional`` (activations, losses, group norm, 1-D batch norm, 1-D convolution and
pooling, channel dropout, resampling, reshaping), differentiable as the ops they are composed of."""

import math

from .. import _ember
from . import functional as F
from . import init
from .modules import Module, Parameter

__all__ = [
    "AdaptiveAvgPool1d",
    "AvgPool1d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "CELU",
    "Conv1d",
    "ConvTranspose1d",
    "CosineSimilarity",
    "CrossEntropyLoss",
    "Dropout2d",
    "ELU",
    "GLU",
    "GroupNorm",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "HuberLoss",
    "KLDivLoss",
    "L1Loss",
    "LeakyReLU",
    "LogSigmoid",
    "LogSoftmax",
    "MSELoss",
    "MaxPool1d",
    "Mish",
    "NLLLoss",
    "PReLU",
    "PairwiseDistance",
    "PixelShuffle",
    "PixelUnshuffle",
    "ReLU6",
    "SELU",
    "Sigmoid",
    "SmoothL1Loss",
    "Softmax",
    "Softplus",
    "Tanh",
    "Unflatten",
    "Upsample",
]


class Tanh(Module):
    """tanh(x)."""

    def forward(self, input):
        """tanh(input)."""
        return _ember.tanh(input)


class Sigmoid(Module):
    """1 / (1 + e^-x)."""

    def forward(self, input):
        """sigmoid(input)."""
        return _ember.sigmoid(input)


class LeakyReLU(Module):
    """x where x > 0, negative_slope * x elsewhere."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, input):
        """leaky_relu(input)."""
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        """The slope."""
        return f"negative_slope={self.negative_slope}"


class _Functional(Module):
    # A module whose forward is the functional op _fn of the input and the module's settings, the
    # attributes named in _settings (passed in that order).
    _fn = None
    _settings = ()

    def __init__(self, *values):
        super().__init__()
        for name, value in zip(self._settings, values):
            setattr(self, name, value)

    def forward(self, input):
        """The op of input."""
        return type(self)._fn(input, *(getattr(self, name) for name in self._settings))

    def extra_repr(self):
        """The settings."""
        return ", ".join(f"{name}={getattr(self, name)}" for name in self._settings)


class Softmax(_Functional):
    """softmax along dim."""

    _fn, _settings = staticmethod(F.softmax), ("dim",)

    def __init__(self, dim=None):
        super().__init__(dim)


class LogSoftmax(_Functional):
    """log(softmax) along dim."""

    _fn, _settings = staticmethod(F.log_softmax), ("dim",)

    def __init__(self, dim=None):
        super().__init__(dim)


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def extra_repr(self):
        """The reduction, when not 'mean'."""
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class CrossEntropyLoss(_Loss):
    """F.cross_entropy as a module: logits (N, C, ...) against class indices or probabilities."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        """The loss of input against target."""
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    """F.nll_loss as a module."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        """The loss of input against target."""
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    """F.mse_loss as a module."""

    def forward(self, input, target):
        """The loss of input against target."""
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """F.l1_loss as a module."""

    def forward(self, input, target):
        """The loss of input against target."""
        return F.l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """F.binary_cross_entropy_with_logits as a module (weight and pos_weight as buffers)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        F._legacy(size_average, reduce, "BCEWithLogitsLoss")
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        """The loss of logits input against target."""
        return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class BCELoss(_Loss):
    """F.binary_cross_entropy as a module (weight as a buffer)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction)
        F._legacy(size_average, reduce, "BCELoss")
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        """The loss of probabilities input against target."""
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """F.smooth_l1_loss as a module."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(reduction)
        F._legacy(size_average, reduce, "SmoothL1Loss")
        self.beta = beta

    def forward(self, input, target):
        """The loss of input against target."""
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """F.huber_loss as a module."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input, target):
        """The loss of input against target."""
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """F.kl_div as a module: input log-probabilities, target probabilities (or log-probabilities with
    log_target=True)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(reduction)
        F._legacy(size_average, reduce, "KLDivLoss")
        self.log_target = log_target

    def forward(self, input, target):
        """The divergence of target from input."""
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class ReLU6(Module):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, input):
        """relu6(input)."""
        return F.relu6(input)


class Hardtanh(_Functional):
    """x limited to [min_val, max_val]."""

    _fn, _settings = staticmethod(F.hardtanh), ("min_val", "max_val")

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val {min_val} must not be greater than max_val {max_val}")
        super().__init__(min_val, max_val)


class ELU(_Functional):
    """x where x > 0, alpha * (e^x - 1) elsewhere."""

    _fn, _settings = staticmethod(F.elu), ("alpha",)

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(alpha)


class CELU(_Functional):
    """max(0, x) + min(0, alpha * (e^(x / alpha) - 1))."""

    _fn, _settings = staticmethod(F.celu), ("alpha",)

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(alpha)


class _Elementwise(Module):
    # An activation with no settings: forward is the functional op of the same name.
    _fn = None

    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, input):
        """The activation of input."""
        return type(self)._fn(input)


class SELU(_Elementwise):
    """scale * elu(x, alpha) with the self-normalising constants."""

    _fn = staticmethod(F.selu)


class Hardsigmoid(_Elementwise):
    """relu6(x + 3) / 6."""

    _fn = staticmethod(F.hardsigmoid)


class Hardswish(_Elementwise):
    """x * relu6(x + 3) / 6."""

    _fn = staticmethod(F.hardswish)


class Mish(_Elementwise):
    """x * tanh(softplus(x))."""

    _fn = staticmethod(F.mish)


class LogSigmoid(_Elementwise):
    """log(sigmoid(x))."""

    _fn = staticmethod(F.logsigmoid)


class Softplus(_Functional):
    """log(1 + e^(beta x)) / beta, linear above threshold."""

    _fn, _settings = staticmethod(F.softplus), ("beta", "threshold")

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__(beta, threshold)


class GLU(_Functional):
    """a * sigmoid(b) of the two halves of the input along dim."""

    _fn, _settings = staticmethod(F.glu), ("dim",)

    def __init__(self, dim=-1):
        super().__init__(dim)


class PReLU(Module):
    """x where x >= 0, a * x elsewhere, with a learned slope a: one, or one per channel
    (``num_parameters``), starting at ``init``."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        if num_parameters < 1:
            raise ValueError(f"PReLU: num_parameters must be positive, got {num_parameters}")
        self.num_parameters = num_parameters
        self.weight = Parameter(_ember.full((num_parameters,), float(init), dtype=dtype, device=device))

    def forward(self, input):
        """prelu(input, weight)."""
        return F.prelu(input, self.weight)

    def extra_repr(self):
        """The slopes' count."""
        return f"num_parameters={self.num_parameters}"


# ---- normalisation and dropout


class GroupNorm(Module):
    """Normalises (N, C, ...) over groups of C / num_groups channels and the spatial dims, then scales and
    shifts per channel (weight 1, bias 0 at the start)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels {num_channels} must be divisible by num_groups {num_groups}")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(_ember.ones(num_channels, dtype=dtype, device=device))
            self.bias = Parameter(_ember.zeros(num_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        """group_norm(input)."""
        if input.dim() < 2 or input.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expects (N, {self.num_channels}, ...), got shape {tuple(input.shape)}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        """Groups, channels, eps, affine."""
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class BatchNorm1d(Module):
    """Batch norm of (N, C) or (N, C, L) per channel, with running statistics (buffers running_mean,
    running_var, num_batches_tracked) updated in training mode."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        super().__init__()
        if momentum is None:
            raise NotImplementedError("BatchNorm1d: momentum=None (a cumulative average) is not supported")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(_ember.ones(num_features, dtype=dtype, device=device))
            self.bias = Parameter(_ember.zeros(num_features, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _ember.zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", _ember.ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", _ember.zeros((), dtype=_ember.int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def forward(self, input):
        """Normalised input: by the batch's statistics in training (or without running statistics), by
        the running ones in eval mode."""
        if input.dim() not in (2, 3) or input.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm1d: expects (N, {self.num_features}) or (N, {self.num_features}, L), "
                             f"got shape {tuple(input.shape)}")
        batch_stats = self.training or self.running_mean is None
        if self.training and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, batch_stats,
                            self.momentum, self.eps)

    def extra_repr(self):
        """Features, eps, momentum, affine, track_running_stats."""
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class Dropout2d(Module):
    """Zeroes whole channels with probability p in training mode (scaling the rest by 1 / (1 - p))."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout2d: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, input):
        """dropout2d(input) in training mode, input itself in eval mode."""
        return F.dropout2d(input, self.p, self.training)

    def extra_repr(self):
        """p."""
        return f"p={self.p}"


# ---- resampling and reshaping


class Upsample(Module):
    """F.interpolate as a module: by ``size`` or ``scale_factor``, mode 'nearest', 'linear' or
    'bilinear'."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        """input resized."""
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self):
        """The size or scale factor, and the mode."""
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class PixelShuffle(_Functional):
    """(N, C r^2, H, W) -> (N, C, H r, W r)."""

    _fn, _settings = staticmethod(F.pixel_shuffle), ("upscale_factor",)

    def __init__(self, upscale_factor):
        super().__init__(upscale_factor)


class PixelUnshuffle(_Functional):
    """(N, C, H r, W r) -> (N, C r^2, H, W)."""

    _fn, _settings = staticmethod(F.pixel_unshuffle), ("downscale_factor",)

    def __init__(self, downscale_factor):
        super().__init__(downscale_factor)


class Unflatten(Module):
    """Splits dim into unflattened_size (the inverse of Flatten); one entry may be -1."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        """input with dim split."""
        n = input.dim()
        if not -n <= self.dim < n:
            raise IndexError(f"Unflatten: dim {self.dim} out of range for a tensor of {n} dimension(s)")
        d = self.dim % n
        shape = tuple(input.shape)
        return input.reshape(shape[:d] + self.unflattened_size + shape[d + 1:])

    def extra_repr(self):
        """dim and the sizes."""
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class CosineSimilarity(Module):
    """cosine_similarity(x1, x2) along dim."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        """The similarity of x1 and x2."""
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """pairwise_distance(x1, x2): the p-norm of x1 - x2 along the last dim."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        """The distance of x1 and x2."""
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# ---- 1-D convolution and pooling


class Conv1d(Module):
    """1-D convolution over (N, C, L): weight (out_channels, in_channels / groups, kernel_size), bias
    (out_channels); PyTorch's initialisation (Kaiming uniform with a = sqrt(5), the bias uniform in
    +-1 / sqrt(fan_in))."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv1d: padding_mode='{padding_mode}' is not supported (only 'zeros')")
        k = F._single(kernel_size, "kernel_size", "Conv1d")
        if in_channels <= 0 or out_channels <= 0 or k <= 0 or groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv1d: bad arguments in={in_channels} out={out_channels} kernel={k} groups={groups}")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (k,)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.weight = Parameter(_ember.empty((out_channels, in_channels // groups, k), dtype=dtype, device=device))
        self.bias = Parameter(_ember.empty((out_channels,), dtype=dtype, device=device)) if bias else None
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(in_channels // groups * k)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        """conv1d(input, weight, bias)."""
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        """Channels, kernel, stride, padding."""
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}")


class ConvTranspose1d(Module):
    """1-D transposed convolution over (N, C, L): weight (in_channels, out_channels / groups, kernel_size),
    bias (out_channels); PyTorch's initialisation, whose fan_in is out_channels / groups * kernel_size."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError(f"ConvTranspose1d: padding_mode='{padding_mode}' is not supported (only 'zeros')")
        k = F._single(kernel_size, "kernel_size", "ConvTranspose1d")
        if in_channels <= 0 or out_channels <= 0 or k <= 0 or groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"ConvTranspose1d: bad arguments in={in_channels} out={out_channels} kernel={k} "
                             f"groups={groups}")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (k,)
        self.stride, self.padding, self.output_padding = stride, padding, output_padding
        self.dilation, self.groups = dilation, groups
        self.weight = Parameter(_ember.empty((in_channels, out_channels // groups, k), dtype=dtype, device=device))
        self.bias = Parameter(_ember.empty((out_channels,), dtype=dtype, device=device)) if bias else None
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(out_channels // groups * k)
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        """conv_transpose1d(input, weight, bias)."""
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)

    def extra_repr(self):
        """Channels, kernel, stride, padding, output_padding."""
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, output_padding={self.output_padding}")


class MaxPool1d(_Functional):
    """Max over windows of kernel_size along L (stride defaults to kernel_size)."""

    _fn = staticmethod(F.max_pool1d)
    _settings = ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__(kernel_size, stride, padding, dilation, ceil_mode, return_indices)


class AvgPool1d(_Functional):
    """Mean over windows of kernel_size along L (stride defaults to kernel_size)."""

    _fn = staticmethod(F.avg_pool1d)
    _settings = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad")

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AdaptiveAvgPool1d(_Functional):
    """Mean pooling of L to output_size."""

    _fn, _settings = staticmethod(F.adaptive_avg_pool1d), ("output_size",)

    def __init__(self, output_size):
        super().__init__(output_size)

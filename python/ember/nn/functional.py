"""The functional ops (``torch.nn.functional``), with PyTorch's argument names and defaults.

Convolution, pooling, normalisation, dropout, embedding, the losses ember has kernels for
(``cross_entropy``, ``nll_loss``, ``mse_loss``) and attention are ember's C++ ops (nn/*.h); the rest
(``l1_loss``, ``binary_cross_entropy_with_logits``, ``leaky_relu``, ``one_hot``, ...) are composed of
ember ops here, so they are differentiable as the ops they use.
"""

from .. import _ember
from .._ember import _F

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "dropout2d",
    "elu",
    "embedding",
    "gelu",
    "glu",
    "group_norm",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "huber_loss",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsigmoid",
    "max_pool1d",
    "max_pool2d",
    "mish",
    "mse_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "pairwise_distance",
    "pixel_shuffle",
    "pixel_unshuffle",
    "prelu",
    "relu",
    "relu6",
    "relu_",
    "scaled_dot_product_attention",
    "selu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softplus",
    "tanh",
    "upsample",
]

conv2d = _F.conv2d
conv_transpose2d = _F.conv_transpose2d
max_pool2d = _F.max_pool2d
avg_pool2d = _F.avg_pool2d
adaptive_avg_pool2d = _F.adaptive_avg_pool2d
layer_norm = _F.layer_norm
embedding = _F.embedding
scaled_dot_product_attention = _F.scaled_dot_product_attention
pad = _F.pad
linear = _ember.linear


# ---- 1-D convolution and pooling: the 2-D ops over (N, C, 1, L)


def _single(value, name, op):
    """One int of an int or a 1-tuple (PyTorch's 1-D arguments)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ValueError(f"{op}: {name} must be an int or a 1-tuple, got {tuple(value)}")
        value = value[0]
    return value


def _rows(input, op):
    """(N, C, L) or (C, L) as (N, C, 1, L), and whether it had a batch dim."""
    if input.dim() not in (2, 3):
        raise ValueError(f"{op}: expects (N, C, L) or (C, L), got shape {tuple(input.shape)}")
    batched = input.dim() == 3
    return (input if batched else input.unsqueeze(0)).unsqueeze(2), batched


def _unrows(out, batched):
    out = out.squeeze(2)
    return out if batched else out.squeeze(0)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of (N, C, L) by weight (out, C / groups, k); padding an int, 'same' or 'valid'."""
    x, batched = _rows(input, "conv1d")
    if weight.dim() != 3:
        raise ValueError(f"conv1d: weight must be (out_channels, in_channels / groups, k), got shape {tuple(weight.shape)}")
    pad = padding if isinstance(padding, str) else (0, _single(padding, "padding", "conv1d"))
    out = conv2d(x, weight.unsqueeze(2), bias, (1, _single(stride, "stride", "conv1d")), pad,
                 (1, _single(dilation, "dilation", "conv1d")), groups)
    return _unrows(out, batched)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-D transposed convolution of (N, C_in, L) by weight (C_in, C_out / groups, k): conv1d's gradient
    with respect to its input, with L_out = (L - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1."""
    x, batched = _rows(input, "conv_transpose1d")
    if weight.dim() != 3:
        raise ValueError(f"conv_transpose1d: weight must be (in_channels, out_channels / groups, k), got shape "
                         f"{tuple(weight.shape)}")
    out = conv_transpose2d(x, weight.unsqueeze(2), bias, (1, _single(stride, "stride", "conv_transpose1d")),
                           (0, _single(padding, "padding", "conv_transpose1d")),
                           (0, _single(output_padding, "output_padding", "conv_transpose1d")), groups,
                           (1, _single(dilation, "dilation", "conv_transpose1d")))
    return _unrows(out, batched)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over windows of kernel_size along L (stride defaults to kernel_size); with return_indices, also
    each maximum's position in L."""
    x, batched = _rows(input, "max_pool1d")
    k = _single(kernel_size, "kernel_size", "max_pool1d")
    s = k if stride is None else _single(stride, "stride", "max_pool1d")
    out = _F.max_pool2d(x, (1, k), (1, s), (0, _single(padding, "padding", "max_pool1d")),
                        (1, _single(dilation, "dilation", "max_pool1d")), ceil_mode, return_indices)
    if return_indices:
        return _unrows(out[0], batched), _unrows(out[1], batched)
    return _unrows(out, batched)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over windows of kernel_size along L (stride defaults to kernel_size)."""
    x, batched = _rows(input, "avg_pool1d")
    k = _single(kernel_size, "kernel_size", "avg_pool1d")
    s = k if stride is None else _single(stride, "stride", "avg_pool1d")
    out = _F.avg_pool2d(x, (1, k), (1, s), (0, _single(padding, "padding", "avg_pool1d")), ceil_mode,
                        count_include_pad)
    return _unrows(out, batched)


def adaptive_avg_pool1d(input, output_size):
    """Mean pooling of L to output_size."""
    x, batched = _rows(input, "adaptive_avg_pool1d")
    return _unrows(_F.adaptive_avg_pool2d(x, (1, _single(output_size, "output_size", "adaptive_avg_pool1d"))), batched)


def _legacy(size_average, reduce, fn):
    if size_average is not None or reduce is not None:
        raise NotImplementedError(f"{fn}: size_average and reduce are deprecated; use reduction='mean'|'sum'|'none'")


def _reduce(x, reduction, fn):
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    if reduction == "none":
        return x
    raise ValueError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got '{reduction}'")


# ---- activations


def relu(input, inplace=False):
    """max(x, 0) elementwise (in place with inplace=True)."""
    return input.relu_() if inplace else _ember.relu(input)


def relu_(input):
    """max(x, 0) in place."""
    return input.relu_()


def relu6(input, inplace=False):
    """min(max(x, 0), 6)."""
    return input.clamp_(0, 6) if inplace else _ember.clamp(input, 0, 6)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x limited to [min_val, max_val]."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} must not be greater than max_val {max_val}")
    return input.clamp_(min_val, max_val) if inplace else _ember.clamp(input, min_val, max_val)


def gelu(input, approximate="none"):
    """x * Phi(x); approximate='tanh' gives the tanh form."""
    return _ember.gelu(input, approximate)


def silu(input, inplace=False):
    """x * sigmoid(x)."""
    return _ember.silu(input)


def sigmoid(input):
    """1 / (1 + e^-x)."""
    return _ember.sigmoid(input)


def tanh(input):
    """tanh(x)."""
    return _ember.tanh(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, negative_slope * x elsewhere."""
    return _ember.where(input > 0, input, input * negative_slope)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + e^(beta x)) / beta, linear above threshold (as PyTorch)."""
    x = input * beta if beta != 1 else input
    soft = (_ember.clamp(x, min=0) + _ember.log1p(_ember.exp(-x.abs()))) / beta
    return _ember.where(x > threshold, input, soft)


def logsigmoid(input):
    """log(sigmoid(x)), without overflow."""
    return -(_ember.clamp(-input, min=0) + _ember.log1p(_ember.exp(-input.abs())))


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, alpha * (e^x - 1) elsewhere."""
    # exp of the clamped input: the branch where() drops must not be inf, or its gradient is 0 * inf.
    return _ember.where(input > 0, input, alpha * (_ember.exp(_ember.clamp(input, max=0)) - 1))


# SELU's constants, from Klambauer et al., "Self-Normalizing Neural Networks" (2017), eq. 14.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalising constants (alpha 1.6733, scale 1.0507)."""
    return _SELU_SCALE * elu(input, _SELU_ALPHA)


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (e^(x / alpha) - 1))."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    return _ember.where(input > 0, input, alpha * (_ember.exp(_ember.clamp(input / alpha, max=0)) - 1))


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between."""
    return _ember.clamp(input + 3, 0, 6) / 6


def hardswish(input, inplace=False):
    """x * hardsigmoid(x) (MobileNetV3's activation)."""
    return input * hardsigmoid(input)


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    return input * _ember.tanh(softplus(input))


def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the two halves of input along dim."""
    n = input.shape[dim] if input.dim() else 0
    if input.dim() == 0 or n % 2:
        raise ValueError(f"glu: dim {dim} must have an even size, got shape {tuple(input.shape)}")
    a, b = input.chunk(2, dim)
    return a * _ember.sigmoid(b)


def prelu(input, weight):
    """x where x >= 0, weight * x elsewhere; weight has one element or one per channel (dim 1)."""
    n = weight.numel()
    channels = input.shape[1] if input.dim() >= 2 else 1
    if weight.dim() > 1 or n not in (1, channels):
        raise ValueError(f"prelu: weight of shape {tuple(weight.shape)} for input of shape {tuple(input.shape)}; "
                         f"it must hold 1 or {channels} (the channels) elements")
    if n > 1:
        weight = weight.reshape((n,) + (1,) * (input.dim() - 2))
    return _ember.where(input >= 0, input, weight * input)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along dim."""
    if dim is None:
        raise ValueError("softmax: give dim (ember has no implicit dim)")
    return _ember.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log(softmax(x)) along dim."""
    if dim is None:
        raise ValueError("log_softmax: give dim (ember has no implicit dim)")
    return _ember.log_softmax(input, dim, dtype)


# ---- regularisation and normalisation


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes elements with probability p and scales the rest by 1 / (1 - p); input itself when not
    training or p is 0."""
    out = _F.dropout(input, p, training)
    if inplace and out is not input and not out.is_same(input):
        return input.copy_(out)
    return out


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Batch norm per channel of (N, C, ...); in training the running statistics (when given) are
    updated in place."""
    return _F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels with probability p and scales the rest by 1 / (1 - p): input (N, C, H, W), or
    (C, H, W) without a batch dim."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout2d: p must be in [0, 1], got {p}")
    if input.dim() not in (3, 4):
        raise ValueError(f"dropout2d: expects (N, C, H, W) or (C, H, W), got shape {tuple(input.shape)}")
    if not training or p == 0:
        return input
    channels = tuple(input.shape[: input.dim() - 2]) + (1, 1)
    keep = _ember.rand(channels, device=input.device) >= p
    out = input * keep.to(input.dtype) / (1 - p) if p < 1 else input * 0
    return input.copy_(out) if inplace else out


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalises (N, C, ...) over each group of C / num_groups channels and the spatial dims, then scales
    and shifts per channel."""
    if input.dim() < 2:
        raise ValueError(f"group_norm: expects (N, C, ...), got shape {tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise ValueError(f"group_norm: {c} channels cannot be split into {num_groups} groups")
    grouped = input.reshape(n, num_groups, -1)
    mean = grouped.mean(2, keepdim=True)
    var = _ember.var(grouped, 2, correction=0, keepdim=True)
    out = ((grouped - mean) * _ember.rsqrt(var + eps)).reshape(input.shape)
    per_channel = (c,) + (1,) * (input.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(per_channel)
    if bias is not None:
        out = out + bias.reshape(per_channel)
    return out


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """x / max(||x||_p, eps) along dim."""
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported")
    return input / _ember.clamp(_ember.norm(input, p, dim, True), min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """x1 . x2 / (max(||x1||, eps) * max(||x2||, eps)) along dim (the inputs broadcast)."""
    n1 = _ember.clamp(_ember.norm(x1, 2, dim), min=eps)
    n2 = _ember.clamp(_ember.norm(x2, 2, dim), min=eps)
    return (x1 * x2).sum(dim) / (n1 * n2)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p along the last dim."""
    return _ember.norm(x1 - x2 + eps, p, -1, keepdim)


# ---- resampling


def pixel_shuffle(input, upscale_factor):
    """(N, C r^2, H, W) -> (N, C, H r, W r): each group of r^2 channels becomes an r x r block."""
    r = upscale_factor
    if input.dim() != 4 or r <= 0 or input.shape[1] % (r * r):
        raise ValueError(f"pixel_shuffle: expects (N, C * {r}^2, H, W), got shape {tuple(input.shape)}")
    n, c, h, w = input.shape
    out = input.reshape(n, c // (r * r), r, r, h, w).permute(0, 1, 4, 2, 5, 3)
    return out.reshape(n, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(N, C, H r, W r) -> (N, C r^2, H, W), the inverse of pixel_shuffle."""
    r = downscale_factor
    if input.dim() != 4 or r <= 0 or input.shape[2] % r or input.shape[3] % r:
        raise ValueError(f"pixel_unshuffle: expects (N, C, H * {r}, W * {r}), got shape {tuple(input.shape)}")
    n, c, h, w = input.shape
    out = input.reshape(n, c, h // r, r, w // r, r).permute(0, 1, 3, 5, 2, 4)
    return out.reshape(n, c * r * r, h // r, w // r)


def _source_index(out_size, in_size, scale_factor, align_corners, linear):
    """Where each output position reads from along one dim, as a list of floats: PyTorch's rule for
    ``interpolate`` (its documented align_corners semantics; the scale is in / out, or 1 / scale_factor
    when that was given)."""
    if linear and align_corners:
        step = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        return [i * step for i in range(out_size)]
    step = 1.0 / scale_factor if scale_factor else in_size / out_size
    if not linear:  # nearest: the pixel whose left edge is at or before the output pixel's
        return [float(min(int(i * step), in_size - 1)) for i in range(out_size)]
    return [max((i + 0.5) * step - 0.5, 0.0) for i in range(out_size)]


def _resample(x, dim, out_size, scale_factor, align_corners, linear):
    in_size = x.shape[dim]
    src = _source_index(out_size, in_size, scale_factor, align_corners, linear)
    low = [min(int(s), in_size - 1) for s in src]
    picked = x.index_select(dim, _ember.tensor(low, device=x.device))
    if not linear:
        return picked
    high = [min(i + 1, in_size - 1) for i in low]
    shape = [1] * x.dim()
    shape[dim] = out_size
    frac = _ember.tensor([s - i for s, i in zip(src, low)], dtype=x.dtype, device=x.device).reshape(shape)
    return picked + (x.index_select(dim, _ember.tensor(high, device=x.device)) - picked) * frac


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resizes (N, C, L) or (N, C, H, W) by ``size`` or ``scale_factor``: mode 'nearest', 'linear' (3-D)
    or 'bilinear' (4-D), the source positions as PyTorch computes them."""
    spatial = input.dim() - 2
    if spatial not in (1, 2):
        raise ValueError(f"interpolate: expects (N, C, L) or (N, C, H, W), got shape {tuple(input.shape)}")
    linear_mode = {1: "linear", 2: "bilinear"}[spatial]
    if mode not in ("nearest", linear_mode):
        raise NotImplementedError(f"interpolate: mode '{mode}' for a {input.dim()}-D input is not supported "
                                  f"('nearest' or '{linear_mode}')")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("interpolate: align_corners applies to the linear modes only")
    if antialias:
        raise NotImplementedError("interpolate: antialias is not supported")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    in_sizes = tuple(input.shape[2:])
    if size is not None:
        sizes = (size,) * spatial if isinstance(size, int) else tuple(size)
        scales = (None,) * spatial
    else:
        scales = (scale_factor,) * spatial if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
        if len(scales) != spatial or any(not s > 0 for s in scales):
            raise ValueError(f"interpolate: scale_factor {scale_factor} must be positive, one per spatial dim")
        sizes = tuple(int(n * s) for n, s in zip(in_sizes, scales))
        if recompute_scale_factor:
            scales = (None,) * spatial
    if len(sizes) != spatial or any(s <= 0 for s in sizes):
        raise ValueError(f"interpolate: output size {sizes} must be positive, one per spatial dim of {in_sizes}")
    out = input
    for d, (n, s) in enumerate(zip(sizes, scales)):
        out = _resample(out, 2 + d, n, s, bool(align_corners), mode != "nearest")
    return out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """interpolate under its older name."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def _same_shape(input, target, who):
    # PyTorch refuses a target whose size differs from the input's rather than broadcasting them.
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"{who}: target of shape {tuple(target.shape)} for input of shape {tuple(input.shape)}; "
                         "they must be the same")


def one_hot(tensor, num_classes=-1):
    """An int64 (..., num_classes) tensor with 1 at each index of tensor (num_classes: max + 1 when -1).
    ValueError for an index below 0 or not below num_classes (a row of zeros otherwise)."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, int):
        raise TypeError(f"one_hot: num_classes must be an int, got {num_classes!r}")
    if tensor.is_floating_point() or tensor.dtype is _ember.bool:
        raise TypeError(f"one_hot: expects an integer tensor of class indices, got {tensor.dtype}")
    if tensor.numel() == 0:
        if num_classes < 0:
            raise ValueError("one_hot: cannot infer num_classes from an empty tensor; give it")
        low = high = 0
    else:
        low, high = int(tensor.min().item()), int(tensor.max().item())
    if num_classes < 0:
        num_classes = high + 1
    if low < 0 or high >= num_classes:
        raise ValueError(f"one_hot: class indices must be in [0, {num_classes}), got values from {low} to {high}")
    return (tensor.unsqueeze(-1) == _ember.arange(num_classes, device=tensor.device)).long()


# ---- losses


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy of logits (N, C, ...) against class indices (N, ...) or class probabilities
    (input's shape); one fused kernel for index targets without a weight."""
    _legacy(size_average, reduce, "cross_entropy")
    return _F.cross_entropy(input, target, weight, ignore_index=ignore_index, reduction=reduction,
                            label_smoothing=label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log likelihood of log-probabilities (N, C, ...) at integer targets."""
    _legacy(size_average, reduce, "nll_loss")
    return _F.nll_loss(input, target, weight, ignore_index=ignore_index, reduction=reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean squared error (input and target broadcast)."""
    _legacy(size_average, reduce, "mse_loss")
    return _F.mse_loss(input, target, reduction=reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean absolute error."""
    _legacy(size_average, reduce, "l1_loss")
    return _reduce((input - target).abs(), reduction, "l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Huber-like: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere."""
    _legacy(size_average, reduce, "smooth_l1_loss")
    if not beta >= 0:  # NaN too
        raise ValueError(f"smooth_l1_loss: beta must not be negative or NaN, got {beta}")
    d = (input - target).abs()
    loss = _ember.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta) if beta > 0 else d
    return _reduce(loss, reduction, "smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere (d = input - target)."""
    if not delta > 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    d = (input - target).abs()
    return _reduce(_ember.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction, "huber_loss")


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence of target from log-probabilities input: target (log target - input), 0 where target
    is 0; reduction 'batchmean' divides the sum by the batch size (the true KL divergence), 'mean' by
    the element count."""
    _legacy(size_average, reduce, "kl_div")
    if log_target:
        loss = _ember.exp(target) * (target - input)
    else:
        safe = _ember.where(target > 0, target, _ember.ones_like(target))
        loss = _ember.where(target > 0, target * (_ember.log(safe) - input), _ember.zeros_like(input))
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.dim() else 1)
    return _reduce(loss, reduction, "kl_div")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """-(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))), computed stably from the logits."""
    _legacy(size_average, reduce, "binary_cross_entropy_with_logits")
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    log_sig = logsigmoid(input)
    log_one_minus = logsigmoid(-input)
    if pos_weight is not None:
        loss = -(pos_weight * target * log_sig + (1 - target) * log_one_minus)
    else:
        loss = -(target * log_sig + (1 - target) * log_one_minus)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t log p + (1 - t) log(1 - p)) of probabilities p, each log clamped at -100 (as PyTorch)."""
    _legacy(size_average, reduce, "binary_cross_entropy")
    _same_shape(input, target, "binary_cross_entropy")
    log_p = _ember.clamp(_ember.log(input), min=-100)
    log_q = _ember.clamp(_ember.log(1 - input), min=-100)
    loss = -(target * log_p + (1 - target) * log_q)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")

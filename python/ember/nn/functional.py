"""The functional ops (``torch.nn.functional``), with PyTorch's argument names and defaults.

Convolution, pooling, normalisation, dropout, embedding, the losses ember has kernels for
(``cross_entropy``, ``nll_loss``, ``mse_loss``) and attention are ember's C++ ops (nn/*.h); the rest
(``l1_loss``, ``binary_cross_entropy_with_logits``, ``leaky_relu``, ``one_hot``, ...) are composed of
ember ops here, so they are differentiable as the ops they use.
"""

from .. import _ember
from .._ember import _F

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv2d",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "hardtanh",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsigmoid",
    "max_pool2d",
    "mse_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "relu",
    "relu6",
    "relu_",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softplus",
    "tanh",
]

conv2d = _F.conv2d
max_pool2d = _F.max_pool2d
avg_pool2d = _F.avg_pool2d
adaptive_avg_pool2d = _F.adaptive_avg_pool2d
layer_norm = _F.layer_norm
embedding = _F.embedding
scaled_dot_product_attention = _F.scaled_dot_product_attention
pad = _F.pad
linear = _ember.linear


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


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """x / max(||x||_p, eps) along dim."""
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported")
    return input / _ember.clamp(_ember.norm(input, p, dim, True), min=eps)


def _same_shape(input, target, who):
    # PyTorch refuses a target whose size differs from the input's rather than broadcasting them.
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"{who}: target of shape {tuple(target.shape)} for input of shape {tuple(input.shape)}; "
                         "they must be the same")


def one_hot(tensor, num_classes=-1):
    """An int64 (..., num_classes) tensor with 1 at each index of tensor (num_classes: max + 1 when -1).
    ValueError for an index below 0 or not below num_classes (a row of zeros otherwise)."""
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
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must not be negative, got {beta}")
    d = (input - target).abs()
    loss = _ember.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta) if beta > 0 else d
    return _reduce(loss, reduction, "smooth_l1_loss")


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

"""Parameter initialisation with PyTorch's formulas (``torch.nn.init``), run by ember's C++ nn::init:
each writes into the tensor in place, without recording a graph, and returns it. ``generator`` (an
``ember.Generator``) replaces the default one."""

from .._ember import _nn

__all__ = [
    "calculate_gain",
    "constant_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity ('linear', 'conv2d', 'sigmoid', 'tanh', 'relu',
    'leaky_relu', 'selu')."""
    return _nn.calculate_gain(nonlinearity, param)


def _calculate_fan_in_and_fan_out(tensor):
    return _nn.calculate_fan_in_and_fan_out(tensor)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills tensor from U(a, b)."""
    _nn.uniform_(tensor, a, b, generator)
    return tensor


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills tensor from N(mean, std^2)."""
    _nn.normal_(tensor, mean, std, generator)
    return tensor


def constant_(tensor, val):
    """Fills tensor with val."""
    _nn.constant_(tensor, val)
    return tensor


def zeros_(tensor):
    """Fills tensor with 0."""
    return constant_(tensor, 0.0)


def ones_(tensor):
    """Fills tensor with 1."""
    return constant_(tensor, 1.0)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He initialisation: U(-bound, bound), bound = gain * sqrt(3 / fan)."""
    _nn.kaiming_uniform_(tensor, a, mode, nonlinearity, generator)
    return tensor


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He initialisation: N(0, std^2), std = gain / sqrt(fan)."""
    _nn.kaiming_normal_(tensor, a, mode, nonlinearity, generator)
    return tensor


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot initialisation: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))."""
    _nn.xavier_uniform_(tensor, gain, generator)
    return tensor


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot initialisation: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    _nn.xavier_normal_(tensor, gain, generator)
    return tensor


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std^2) restricted to [a, b] (out-of-range draws redrawn)."""
    _nn.trunc_normal_(tensor, mean, std, a, b, generator)
    return tensor

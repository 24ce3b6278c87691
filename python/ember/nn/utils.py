"""``torch.nn.utils``'s gradient clipping, over ember's C++ kernels (optim/clip_grad.h): the norm of all
gradients is computed on their device by one multi-tensor kernel and the scaling applied there,
without reading the norm back unless ``error_if_nonfinite``."""

from .. import _ember
from .._ember import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "parameters_to_vector", "vector_to_parameters"]


def _param_list(parameters):
    if isinstance(parameters, Tensor):
        return [parameters]
    return [p for p in parameters if p is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales every gradient by min(1, max_norm / (total + 1e-6)), total being the norm_type-norm of all
    gradients together (inf: max |g|), and returns total as a 0-dim tensor. A non-finite total
    leaves the gradients as they are (or raises ``ember.ValueError`` with ``error_if_nonfinite``)."""
    return _ember._clip_grad_norm_(_param_list(parameters), float(max_norm), float(norm_type), bool(error_if_nonfinite))


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient element to [-clip_value, clip_value]."""
    _ember._clip_grad_value_(_param_list(parameters), float(clip_value))


def get_total_norm(parameters, norm_type=2.0):
    """The norm_type-norm of the gradients of ``parameters`` together (a 0-dim tensor)."""
    return _ember._total_grad_norm(_param_list(parameters), float(norm_type))


def parameters_to_vector(parameters):
    """The parameters flattened and joined into one vector (a copy)."""
    return _ember.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of vec into each parameter, in place."""
    from ..autograd import no_grad

    offset = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].reshape(p.shape))
            offset += n

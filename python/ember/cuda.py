"""CUDA device queries (``ember.cuda.is_available()``), as ``torch.cuda``."""

from . import _ember

__all__ = ["device_count", "is_available", "synchronize"]


def device_count():
    """The number of visible CUDA devices (0 when ember was built without CUDA or no GPU is present)."""
    return _ember._cuda_device_count()


def is_available():
    """Whether a CUDA device is visible."""
    return device_count() > 0


def synchronize(device=None):
    """Waits on the host until the work queued on the current stream of ``device`` (cuda:0 by default,
    or an ``ember.device`` / ``"cuda:N"``) has finished."""
    if device is None:
        index = 0
    elif isinstance(device, int):
        index = device
    else:
        index = _ember.device(device).index if isinstance(device, str) else device.index
    _ember._cuda_synchronize(index or 0)

"""CUDA devices from Python, as ``torch.cuda``: how many there are and which is current, each one's
memory figures and cache, user streams and events (to order and time GPU work), and seeding.

Every call that needs a GPU raises ``ember.DeviceError`` without one; ``is_available()`` and
``device_count()`` answer everywhere. ``device`` arguments take an index, ``"cuda:N"`` or an
``ember.device``; None is the current device."""

import contextlib

from . import _ember

__all__ = ["Event", "Stream", "current_device", "device_count", "empty_cache", "is_available", "manual_seed",
           "manual_seed_all", "max_memory_allocated", "memory_allocated", "memory_reserved", "memory_stats",
           "reset_peak_memory_stats", "set_device", "stream", "synchronize"]


def device_count():
    """The number of visible CUDA devices (0 when ember was built without CUDA or no GPU is present)."""
    return _ember._cuda_device_count()


def is_available():
    """Whether a CUDA device is visible."""
    return device_count() > 0


def _index(device):
    """The device index of an index, ``"cuda:N"``, ``"cuda"`` or ``ember.device``; None is the current
    device."""
    if device is None:
        return current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    device = _ember.device(device) if isinstance(device, str) else device
    if not isinstance(device, _ember.device) or device.type != "cuda":
        raise ValueError(f"expected a CUDA device (an index, 'cuda:N' or ember.device), got {device!r}")
    return device.index or 0


def current_device():
    """The index of the calling thread's current CUDA device (``set_device``'s, else 0)."""
    return _ember._cuda_current_device()


def set_device(device):
    """Makes ``device`` the calling thread's current CUDA device: where tensors made with
    ``device="cuda"`` go."""
    _ember._cuda_set_device(_index(device))


def synchronize(device=None):
    """Waits on the host until the work queued on the current stream of ``device`` has finished."""
    _ember._cuda_synchronize(_index(device))


def memory_stats(device=None):
    """``device``'s memory figures, under the keys of ``torch.cuda.memory_stats``: bytes allocated to
    tensors now and at the peak, bytes reserved from the driver, allocation counts, out-of-memory
    retries and errors."""
    return _ember._cuda_memory_stats(_index(device))


def memory_allocated(device=None):
    """Bytes held by the tensors on ``device`` now."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    """The most bytes the tensors on ``device`` held at once, since the start or
    ``reset_peak_memory_stats``."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    """Bytes ember holds from the driver on ``device``: in use, or cached for reuse."""
    return memory_stats(device)["reserved_bytes.all.current"]


def reset_peak_memory_stats(device=None):
    """Restarts ``max_memory_allocated`` from the bytes in use now."""
    _ember._cuda_reset_peak_memory_stats(_index(device))


def empty_cache(device=None):
    """Hands ``device``'s cached, unused memory back to the driver (lowers ``memory_reserved``)."""
    _ember._cuda_empty_cache(_index(device))


def manual_seed(seed):
    """Seeds ember's random numbers. ember draws them on every device from one generator (the same
    Philox stream on the CPU and on GPUs), so this is ``ember.manual_seed``: it reseeds CPU draws too."""
    _ember.manual_seed(seed)


manual_seed_all = manual_seed


class Stream(_ember._CudaStream):
    """A CUDA stream of ember's own (``torch.cuda.Stream``). Inside ``with ember.cuda.stream(s):``
    ember's work on its device is queued on it."""

    def __init__(self, device=None):
        super().__init__(_index(device))

    @property
    def device(self):
        """The stream's device."""
        return _ember.device("cuda", self.device_index)

    def wait_stream(self, other):
        """Work queued on this stream from now on waits for the work queued on ``other`` so far."""
        event = Event()
        event.record(other)
        self.wait_event(event)


class Event(_ember._CudaEvent):
    """A CUDA event (``torch.cuda.Event``): a point in a stream's work, to wait for or to time from
    (``enable_timing=True``)."""

    def record(self, stream=None):
        """Records the event on ``stream`` (the current device's current stream when None)."""
        if stream is None:
            self._record_on_device(current_device())
        else:
            self._record_on_stream(stream)

    def wait(self, stream=None):
        """Work queued from now on waits for this event: on ``stream``, or on the current device's
        current stream when None (on the device; the host does not wait)."""
        if stream is None:
            self._wait_on_device(current_device())
        else:
            stream.wait_event(self)


def stream(s):
    """A context manager in which ``s`` is its device's current stream (``torch.cuda.stream``); None
    changes nothing."""
    return contextlib.nullcontext() if s is None else _ember._CudaStreamScope(s)

"""Automatic mixed precision (``torch.amp``): ``autocast`` regions, in which ops cast their arguments as
ember's policy table says (tensor/autocast.h: matmul and convolutions in the lower dtype, reductions
and losses in float32), and ``GradScaler``, loss scaling for float16 training
(optim/amp/grad_scaler.h), whose scale, overflow check and skip decision stay on the device.

    with ember.amp.autocast("cpu", dtype=ember.bfloat16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""

import functools

from . import _ember
from ._ember import Tensor, get_autocast_dtype, is_autocast_cache_enabled, is_autocast_enabled

__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_cache_enabled", "is_autocast_enabled"]


class autocast:
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=True)``: inside, ops on
    tensors of ``device_type`` ("cpu" or "cuda") made on this thread follow the autocast policy, casting
    to ``dtype`` (float16 or bfloat16; by default float16 on CUDA, bfloat16 on the CPU). Regions nest,
    and ``enabled=False`` turns autocast off inside one. A context manager or a decorator."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=True):
        if not isinstance(device_type, str):
            raise TypeError(f"autocast: device_type must be a str ('cpu' or 'cuda'), got {type(device_type).__name__}")
        self.device_type = device_type
        self.fast_dtype = dtype
        self._enabled = bool(enabled)
        self._cache_enabled = bool(cache_enabled)
        self._regions = []

    def __enter__(self):
        region = _ember._AutocastRegion()
        region.enter(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled)
        self._regions.append(region)
        return self

    def __exit__(self, *exc):
        self._regions.pop().exit()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)

        return wrapper


def _cpp_optimizer(optimizer):
    cpp = getattr(optimizer, "_cpp", None)
    if cpp is None:
        raise TypeError(f"GradScaler: expected an ember.optim optimizer, got {type(optimizer).__name__}")
    return cpp


class GradScaler:
    """``torch.amp.GradScaler``: multiplies the loss by a scale so that small float16 gradients do not
    flush to zero, divides the gradients by it before the step, skips a step whose gradients are not
    finite (backing the scale off by ``backoff_factor``) and grows the scale by ``growth_factor`` after
    ``growth_interval`` clean steps. The decision is taken on the device: nothing is read back."""

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        self._device = device
        self._cpp = _ember._GradScaler(float(init_scale), float(growth_factor), float(backoff_factor),
                                       int(growth_interval), bool(enabled))

    def scale(self, outputs):
        """outputs * scale: a tensor, or every tensor of a (nested) list or tuple."""
        if isinstance(outputs, Tensor):
            return self._cpp.scale(outputs)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: expected tensors, got {type(outputs).__name__}")

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale now (to clip them before step), recording
        whether any is not finite. ``ember.StateError`` on a second call before update()."""
        self._cpp.unscale_(_cpp_optimizer(optimizer))

    def step(self, optimizer, *args, **kwargs):
        """Unscales if not done yet, then steps the optimizer unless a gradient was not finite (the
        step is skipped on the device, leaving parameters and state unchanged)."""
        if args or kwargs:
            raise NotImplementedError("GradScaler.step: arguments for optimizer.step (a closure) are not supported")
        self._cpp.step(_cpp_optimizer(optimizer))

    def update(self, new_scale=None):
        """After the step: backs off after an overflow, grows after growth_interval clean steps, or sets
        ``new_scale`` (a number or a one-element tensor)."""
        if isinstance(new_scale, Tensor):
            new_scale = new_scale.item()
        self._cpp.update(None if new_scale is None else float(new_scale))

    def get_scale(self):
        """The scale, read on the host (init_scale before the first scale())."""
        return self._cpp.get_scale()

    def is_enabled(self):
        """Whether scaling is on."""
        return self._cpp.is_enabled()

    def _found_inf(self, optimizer):
        """found_inf of the optimizer's last unscale (1: the step was skipped), or None."""
        return self._cpp.found_inf(_cpp_optimizer(optimizer))

    def state_dict(self):
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker (empty
        when disabled)."""
        out = {}
        for key, t in self._cpp.state_dict().items():
            value = t.item()
            out[key] = int(value) if key in ("growth_interval", "_growth_tracker") else float(value)
        return out

    def load_state_dict(self, state_dict):
        """Restores a state dict of state_dict()'s form (the hyperparameters too)."""
        converted = {}
        for key, value in state_dict.items():
            if isinstance(value, Tensor):
                converted[key] = value
            elif key in ("growth_interval", "_growth_tracker"):
                converted[key] = _ember.tensor(int(value), dtype=_ember.int32 if key == "_growth_tracker" else _ember.int64)
            else:
                converted[key] = _ember.tensor(float(value), dtype=_ember.float32)
        self._cpp.load_state_dict(converted)

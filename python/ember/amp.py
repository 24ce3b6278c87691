"""Automatic mixed precision (``torch.amp``): ``autocast`` regions, in which ops cast their arguments as
ember's policy table says (tensor/autocast.h: matmul and convolutions in the lower dtype, reductions
and losses in float32), and ``GradScaler``, loss scaling for float16 training
(optim/amp/grad_scaler.h), whose scale, overflow check and skip decision stay on the device.

    with ember.amp.autocast("cpu", dtype=ember.bfloat16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()

``TrainingPrecision`` runs ember's seven precision modes by name (train/precision.h), the naive ones
(Apex O2's float16 model with float32 master weights) among them, which autocast cannot express.
"""

import contextlib
import functools

from . import _ember
from ._ember import Tensor, get_autocast_dtype, is_autocast_cache_enabled, is_autocast_enabled

__all__ = ["GradScaler", "TrainingPrecision", "autocast", "get_autocast_dtype", "is_autocast_cache_enabled",
           "is_autocast_enabled", "precision_modes"]


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
        for name, value in (("enabled", enabled), ("cache_enabled", cache_enabled)):
            if not isinstance(value, bool):  # bool("no") would be True
                raise TypeError(f"autocast: {name} must be a bool, got {value!r}")
        self._enabled = enabled
        self._cache_enabled = cache_enabled
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


def _cpp_optimizer(optimizer, caller="GradScaler"):
    cpp = getattr(optimizer, "_cpp", None)
    if cpp is None:
        raise TypeError(f"{caller}: expected an ember.optim optimizer, got {type(optimizer).__name__}")
    return cpp


class GradScaler:
    """``torch.amp.GradScaler``: multiplies the loss by a scale so that small float16 gradients do not
    flush to zero, divides the gradients by it before the step, skips a step whose gradients are not
    finite (backing the scale off by ``backoff_factor``) and grows the scale by ``growth_factor`` after
    ``growth_interval`` clean steps. The decision is taken on the device: nothing is read back."""

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        if str(device).split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"GradScaler: device must be 'cpu' or 'cuda', got {device!r}")
        self._device = device
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int):  # int(2.5) would be 2
            raise TypeError(f"GradScaler: growth_interval must be an int, got {growth_interval!r}")
        self._cpp = _ember._GradScaler(float(init_scale), float(growth_factor), float(backoff_factor),
                                       growth_interval, bool(enabled))
        self._python_stepped = []  # the optimizers written in Python stepped since the last update()

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
        step is skipped on the device, leaving parameters and state unchanged). An optimizer written in
        Python is stepped or not by this scaler reading found_inf on the host, as PyTorch's does."""
        if args or kwargs:
            raise NotImplementedError("GradScaler.step: arguments for optimizer.step (a closure) are not supported")
        cpp = _cpp_optimizer(optimizer)
        if getattr(optimizer, "_python_state", None) is None:
            self._cpp.step(cpp)
            return
        if not self._cpp.is_enabled():
            optimizer.step()
            return
        if any(o is optimizer for o in self._python_stepped):
            raise _ember.StateError("GradScaler.step: already called on this optimizer since the last update()")
        if self._cpp.found_inf(cpp) is None:
            self._cpp.unscale_(cpp)
        self._python_stepped.append(optimizer)
        if self._cpp.found_inf(cpp).item() == 0:
            optimizer.step()

    def update(self, new_scale=None):
        """After the step: backs off after an overflow, grows after growth_interval clean steps, or sets
        ``new_scale`` (a number or a one-element tensor)."""
        if isinstance(new_scale, Tensor):
            new_scale = new_scale.item()
        self._cpp.update(None if new_scale is None else float(new_scale))
        self._python_stepped.clear()

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


def precision_modes():
    """The names of ember's training precision modes, as TrainingPrecision takes them."""
    return list(_ember._precision_names())


class TrainingPrecision:
    """One of ember's training precision modes, by name (train/precision.h, the C++ programs' --precision):

      fp32        float32 everywhere
      tf32        float32, matmul and conv on TF32 tensor cores (a GPU's; sets ember.backends' switches)
      amp_fp16    autocast to float16 and GradScaler (PyTorch's AMP)
      amp_bf16    autocast to bfloat16, no loss scaling
      naive_fp16  a float16 model (batch norm kept float32), float32 master weights that the optimizer
                  steps, and a dynamic loss scale (Apex O2, DeepSpeed's and Colossal-AI's fp16)
      naive_bf16  the same in bfloat16, without loss scaling
      pure_bf16   the model and the optimizer state in bfloat16: no masters, no scaling

    It casts ``model`` as the mode asks (build it on its device first) and builds ``optimizer_class``
    with ``optimizer_kwargs`` over what the mode steps: the masters in the naive modes, else the
    parameters. ``optimizer`` is that optimizer (for a scheduler). A step::

        precision.zero_grad()
        with precision.autocast("cuda"):
            loss = loss_fn(model(x.to(precision.input_dtype)), y)
        grad_norm, skipped = precision.backward_and_step(loss, clip_grad_norm=1.0)

    ``backward_and_step`` scales the loss where the mode does, unscales, checks for overflow, clips,
    steps (or skips on an overflow) and updates the scale, all on the device: ``grad_norm`` and
    ``skipped`` are 0-dim tensors nothing has read back. ``grad_scaler`` and ``loss_scaler`` take the
    scalers' options by name (GradScaler's: init_scale, growth_interval, ...; the naive modes'
    DynamicLossScaler: initial_scale_power, loss_scale_window, hysteresis, min_loss_scale, ...)."""

    def __init__(self, model, mode, optimizer_class, grad_scaler=None, loss_scaler=None, **optimizer_kwargs):
        from .nn.modules import _cpp_handle_of
        from .optim import _spec_of_optimizer, _wrap_cpp_optimizer

        if mode not in precision_modes():
            raise ValueError(f"TrainingPrecision: unknown mode {mode!r}; the modes are {', '.join(precision_modes())}")
        kind, options = _spec_of_optimizer(optimizer_class, optimizer_kwargs)
        cpp_module, bridges = _cpp_handle_of(model)
        self.model = model
        self._bridges = bridges  # the C++ stand-ins of Python modules: alive while this is
        self._cpp = _ember._TrainingPrecision(cpp_module, mode, kind, options, dict(grad_scaler or {}),
                                              dict(loss_scaler or {}))
        self.optimizer = _wrap_cpp_optimizer(self._cpp.optimizer(), self)

    @property
    def mode(self):
        """The mode's name."""
        return self._cpp.mode()

    @property
    def input_dtype(self):
        """The dtype the model takes its input in: float16 or bfloat16 in the naive and pure modes, else
        float32."""
        return self._cpp.input_dtype()

    @contextlib.contextmanager
    def autocast(self, device_type="cuda"):
        """The mode's autocast region for the forward and the loss (amp_fp16, amp_bf16); nothing in the
        others."""
        region = self._cpp.autocast(_ember.device(device_type))
        try:
            yield
        finally:
            region.exit()

    def zero_grad(self):
        """Sets the gradients of what the mode steps (and of the model's parameters) to None."""
        self._cpp.zero_grad()

    def backward_and_step(self, loss, clip_grad_norm=0.0):
        """backward(loss) then step(clip_grad_norm): returns (grad_norm, skipped), 0-dim float32 tensors on
        the device (the norm of the unscaled gradients before clipping; 1 when the step was skipped)."""
        return self._cpp.backward_and_step(loss, float(clip_grad_norm))

    def backward(self, loss):
        """One micro-batch's backward (the loss scaled where the mode scales), its gradients added to those
        of the backwards before it since zero_grad(): gradient accumulation."""
        self._cpp.backward(loss)

    def step(self, clip_grad_norm=0.0):
        """The rest of a step over the gradients added up: unscale and overflow check, clipping to
        clip_grad_norm when > 0, the step (skipped on an overflow) and the scale update; returns
        (grad_norm, skipped) as backward_and_step."""
        return self._cpp.step(float(clip_grad_norm))

    @property
    def scales_loss(self):
        """Whether the mode scales the loss (amp_fp16, naive_fp16)."""
        return self._cpp.scales_loss()

    def loss_scale(self):
        """The current loss scale, a 0-dim float32 tensor on the device (1 in the modes that do not scale)."""
        return self._cpp.loss_scale()

    def state_dict(self):
        """The scaler's state and, in the naive modes, the float32 masters: tensors by name (empty in fp32,
        tf32, amp_bf16 and pure_bf16). The optimizer's state is its own (``optimizer.state_dict()``)."""
        return self._cpp.state_dict()

    def load_state_dict(self, state_dict):
        """Restores a state_dict() of the same mode; ValueError when it does not fit."""
        self._cpp.load_state_dict(state_dict)

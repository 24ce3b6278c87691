"""ember: n-dimensional tensors and reverse-mode autograd on a C++20 engine, with PyTorch's Python API.

    import ember
    x = ember.randn(3, 4, requires_grad=True)
    y = (x @ x.T).relu().sum()
    y.backward()
    x.grad

``ember.nn`` (modules, the built-in layers and models, functional), ``ember.optim`` (optimizers, LR
schedulers), ``ember.amp`` (autocast, GradScaler), ``ember.utils.data`` (DataLoader), ``ember.datasets``
and ``ember.distributed`` (process groups, DDP, ZeRO) cover training; ``ember.cuda`` (devices, memory,
streams, events) and ``ember.backends`` (TF32, cuDNN benchmark mode) the GPU; ``save_file``/``load_file`` read and
write safetensors, ``load_checkpoint`` the checkpoints of ember's C++ training program.

Tensors share memory with NumPy (``np.asarray(t)``, ``ember.from_numpy(a)``) and with any DLPack
library (``ember.from_dlpack(obj)``, ``obj.__dlpack__``). ember's C++ errors arrive as ``ember.Error``
subclasses that also derive from the matching builtin (``ember.ShapeError`` is a ``ValueError``).
"""

from . import _build_config

if _build_config.CUDA_BACKEND:  # before the extension loads libember and its CUDA libraries
    from . import _cuda_libraries

    _cuda_libraries.preload()
from . import _ember
from ._ember import *  # noqa: F401,F403  (the Tensor class, dtypes, factories, ops, errors)
from ._ember import is_grad_enabled
from . import _tensor  # noqa: F401  (adds the Python-side Tensor methods)
from ._tensor import bernoulli, isfinite, isinf, isnan
from ._composed import (  # noqa: F401  (also adds their Tensor methods)
    addmm,
    aminmax,
    clamp_max,
    clamp_min,
    count_nonzero,
    diag,
    diagonal,
    finfo,
    iinfo,
    isclose,
    lerp,
    moveaxis,
    movedim,
    nan_to_num,
    outer,
    randperm,
    repeat_interleave,
    std_mean,
    trace,
    var_mean,
)
from . import autograd, cuda
from .autograd import enable_grad, inference_mode, is_inference_mode_enabled, no_grad, set_grad_enabled
from . import amp, backends, nn, optim, utils
from .amp import autocast
from .compiled_step import compile_step
from .serialization import load, load_checkpoint, load_file, save, save_checkpoint, save_file

# ember.bool, ember.float and ember.int are dtypes (as in torch); the builtins stay reachable here.
import builtins as _builtins

__version__ = "0.1.0"


def __getattr__(name):
    # ember.distributed and ember.datasets are loaded on first use (they start nothing until called).
    if name in ("distributed", "datasets"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'ember' has no attribute '{name}'")


def is_tensor(obj):
    """Whether ``obj`` is an ``ember.Tensor``."""
    return isinstance(obj, Tensor)


def is_floating_point(input):
    """Whether ``input``'s dtype is a floating one."""
    return input.is_floating_point()


def numel(input):
    """The number of elements of ``input``."""
    return input.numel()


def get_default_dtype():
    """The dtype of floating tensors made without one: ``ember.float32`` (fixed in ember)."""
    return float32


def from_numpy(ndarray):
    """A tensor sharing the memory of a NumPy array (through DLPack: writes through either are seen by
    the other, and the array stays alive while the tensor does). Read-only arrays are copied."""
    import numpy as np

    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(ndarray).__name__}")
    return from_dlpack(ndarray)


_MATMUL_PRECISIONS = ("highest", "high", "medium")
_matmul_precision = "high"  # the last of "high" and "medium" asked for: both allow TF32 in ember


def set_float32_matmul_precision(precision):
    """As ``torch.set_float32_matmul_precision``: "highest" keeps float32 matmul in float32; "high" and
    "medium" let it run on TF32 tensor cores (``ember.backends.cuda.matmul.allow_tf32``; ember has no
    bfloat16-based variant for "medium"). Nothing changes on the CPU."""
    global _matmul_precision
    if precision not in _MATMUL_PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: expected one of {_MATMUL_PRECISIONS}, got {precision!r}")
    if precision != "highest":
        _matmul_precision = precision
    backends.cuda.matmul.allow_tf32 = precision != "highest"


def get_float32_matmul_precision():
    """"highest" while float32 matmul stays float32, else the precision last set ("high" or "medium")."""
    return _matmul_precision if backends.cuda.matmul.allow_tf32 else "highest"


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, sharing memory when it can: a tensor of the right dtype and device comes back
    as it is, a NumPy array is viewed (then converted if dtype or device differ); anything else is
    copied as ``ember.tensor`` does."""
    if isinstance(data, Tensor):
        t = data
    else:
        t = None
        if type(data).__module__ == "numpy" and _builtins.hasattr(data, "__dlpack__"):
            try:
                t = from_dlpack(data)
            except (_builtins.BufferError, _builtins.TypeError, Error):
                t = None  # non-native byte order, read-only or an unsupported dtype: copy instead
        if t is None:
            return tensor(data, dtype=dtype, device=device)
    if device is not None:
        t = t.to(device)
    if dtype is not None:
        t = t.to(dtype)
    return t


# `from ember import *` brings every public name except those that would shadow a builtin there
# (ember.bool, ember.int, ember.float, ember.IndexError, ...): reach those as ember.<name>.
__all__ = sorted(
    name
    for name, value in list(globals().items())
    if not name.startswith("_") and not _builtins.hasattr(_builtins, name) and not isinstance(value, type(_builtins))
) + ["amp", "autograd", "backends", "cuda", "datasets", "distributed", "nn", "optim", "utils"]


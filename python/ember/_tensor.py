"""The parts of ``ember.Tensor`` written in Python: NumPy conversion, iteration, formatting, copying,
pickling, the NaN and infinity tests, composed of comparisons, and the random fills and draws
(``normal_``, ``uniform_``, ``bernoulli``), composed of nn.init's fills and ``rand``. They run rarely
enough that Python's cost does not matter, and NumPy stays an optional dependency (imported on first
use)."""

import builtins

from . import _ember
from ._ember import Tensor


def _numpy():
    import numpy

    return numpy


def numpy(self, *, force=False):
    """The tensor as a NumPy array sharing its memory (CPU tensors of a NumPy dtype, without grad).

    ``force=True`` first detaches and moves to the CPU (then the array may be a copy)."""
    t = self.detach().cpu() if force else self
    return _numpy().asarray(t)


def __array__(self, dtype=None, copy=None):
    """NumPy's conversion hook: a view of this CPU tensor's memory (a copy when dtype differs or copy=True)."""
    np = _numpy()
    self.__array_interface__  # raises TypeError saying why NumPy cannot view it (bfloat16, CUDA, grad)
    arr = np.asarray(memoryview(self))
    if dtype is not None and np.dtype(dtype) != arr.dtype:
        if copy is False:
            raise ValueError("__array__: a different dtype needs a copy, and copy=False was asked for")
        return arr.astype(dtype)
    return arr.copy() if copy else arr


def __iter__(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(self.unbind(0))


def __contains__(self, value):
    return builtins.bool((self == value).any().item())


def __format__(self, spec):
    if self.dim() == 0:
        return self.item().__format__(spec)
    return object.__format__(self, spec)


def isnan(input):
    """Where ``input`` is NaN, as a bool tensor (``torch.isnan``): the elements unequal to themselves.
    Integer and bool tensors have none."""
    return input != input


def isinf(input):
    """Where ``input`` is +inf or -inf, as a bool tensor (``torch.isinf``)."""
    if not input.is_floating_point():
        return _ember.zeros_like(input, dtype=_ember.bool)
    return input.abs() == float("inf")


def isfinite(input):
    """Where ``input`` is neither NaN nor infinite, as a bool tensor (``torch.isfinite``)."""
    return _ember.logical_not(isnan(input) | isinf(input))


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fills the tensor in place from N(mean, std^2), outside the graph (as ``nn.init.normal_``)."""
    _ember._nn.normal_(self, mean, std, generator)
    return self


def uniform_(self, low=0.0, high=1.0, *, generator=None):
    """Fills the tensor in place from U(low, high), outside the graph (as ``nn.init.uniform_``)."""
    _ember._nn.uniform_(self, low, high, generator)
    return self


def bernoulli(input, p=None, *, generator=None):
    """1 with probability ``p`` (by default the elements of ``input``), else 0, in ``input``'s floating
    dtype: ``torch.bernoulli``. ValueError for a probability outside [0, 1]."""
    if not input.is_floating_point():
        raise TypeError(f"bernoulli: expects a floating tensor, got {input.dtype}")
    probs = input.detach() if p is None else p
    if isinstance(probs, Tensor):
        if isnan(probs).any().item():
            raise ValueError("bernoulli: probabilities must be in [0, 1], got NaN")
        low, high = probs.min().item(), probs.max().item()
        if low < 0 or high > 1:
            raise ValueError(f"bernoulli: probabilities must be in [0, 1], got values from {low} to {high}")
    elif not 0 <= probs <= 1:
        raise ValueError(f"bernoulli: probabilities must be in [0, 1], got {probs}")
    draws = _ember.rand(*input.shape, generator=generator, dtype=input.dtype, device=input.device)
    return (draws < probs).to(input.dtype)


def __deepcopy__(self, memo):
    if id(self) in memo:
        return memo[id(self)]
    with _ember_no_grad():
        result = self.detach().clone()
    if self.requires_grad and self.is_leaf:
        result.requires_grad_(True)
    if self.grad is not None:
        result.grad = self.grad.detach().clone()
    memo[id(self)] = result
    return result


def __copy__(self):
    """A copy with its own memory, without history."""
    return self.detach().clone()


def _rebuild(data, dtype_name, shape, requires_grad, device):
    np = _numpy()
    dtype = getattr(_ember, dtype_name, None) if isinstance(dtype_name, str) else None
    if not isinstance(dtype, _ember.dtype):
        raise _ember.FormatError(f"a tensor's dtype is {dtype_name!r}, which is no ember dtype")
    if not isinstance(data, bytes):
        raise _ember.FormatError(f"a tensor's data is a {type(data).__name__}, not bytes")
    load_as = _ember.float32 if dtype is _ember.bfloat16 else dtype
    arr = np.frombuffer(data, dtype=np.dtype(_NUMPY_NAMES[load_as])).reshape(shape)
    if dtype is _ember.bool:  # a byte other than 0 and 1 (a crafted file) is True, as NumPy and PyTorch read it
        arr = np.frombuffer(data, dtype=np.uint8).reshape(shape) != 0
    t = _ember.tensor(arr, dtype=dtype, device=device)
    if requires_grad:
        t.requires_grad_(True)
    return t


_NUMPY_NAMES = {
    _ember.float32: "float32",
    _ember.float16: "float16",
    _ember.float64: "float64",
    _ember.int32: "int32",
    _ember.int64: "int64",
    _ember.uint8: "uint8",
    _ember.bool: "bool",
}


def __reduce_ex__(self, protocol):
    # Values go through the host; bfloat16 as float32, which holds every bfloat16 exactly.
    t = self.detach().cpu()
    if t.dtype is _ember.bfloat16:
        t = t.float()
    data = bytes(memoryview(t.contiguous()))
    name = repr(self.dtype).split(".")[-1]
    return (_rebuild, (data, name, tuple(self.shape), self.requires_grad and self.is_leaf, str(self.device)))


def _ember_no_grad():
    from .autograd import no_grad

    return no_grad()


# NumPy defers binary operators to objects of higher priority that implement the reflected operator:
# np.float64(2) * t then gives a tensor (through Tensor.__rmul__), not an array.
Tensor.__array_priority__ = 1000

for _name, _fn in [
    ("numpy", numpy),
    ("normal_", normal_),
    ("uniform_", uniform_),
    ("bernoulli", bernoulli),
    ("isnan", isnan),
    ("isinf", isinf),
    ("isfinite", isfinite),
    ("__array__", __array__),
    ("__iter__", __iter__),
    ("__contains__", __contains__),
    ("__format__", __format__),
    ("__copy__", __copy__),
    ("__deepcopy__", __deepcopy__),
    ("__reduce_ex__", __reduce_ex__),
]:
    setattr(Tensor, _name, _fn)


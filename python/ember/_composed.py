"""PyTorch's tensor functions that ember composes in Python from its own ops (so autograd
differentiates them wherever those ops are differentiable), and the dtype limits ``finfo`` and
``iinfo`` that such code names beside them. Each function is ``ember.NAME`` and, where PyTorch has the
method, ``Tensor.NAME``, with PyTorch's arguments, defaults and results. (The memory formats,
``ember.channels_last`` and its kin, are the bindings' own: Tensor.to, contiguous and is_contiguous take
them in C++.)"""

import collections
import itertools
import math
import operator

from . import _ember
from ._ember import Tensor
from ._tensor import isfinite, isnan


def _expect_tensors(op, **arguments):
    for name, value in arguments.items():
        if not isinstance(value, Tensor):
            raise TypeError(f"{op}: {name} must be an ember.Tensor, got {type(value).__name__}")


def _int(value, op, name):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {value!r}") from None


def _count(value, op, name):
    count = _int(value, op, name)
    if count < 0:
        raise ValueError(f"{op}: {name} must be >= 0, got {count}")
    return count


def _wrap_dim(dim, ndim, op):
    """dim in [0, ndim) (negative dims count from the end; a 0-d tensor takes 0 and -1, as in torch)."""
    dim = _int(dim, op, "a dim")
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor of {ndim} dims")
    return dim % bound


# ---- values


def lerp(input, end, weight):
    """``input + weight * (end - input)``, broadcast together (torch.lerp's documented formula);
    ``weight`` is a number or a tensor. TypeError unless input is floating and the tensors share its dtype."""
    _expect_tensors("lerp", input=input, end=end)
    if not input.is_floating_point():
        raise TypeError(f"lerp: expects a floating input, got {input.dtype}")
    for name, value in (("end", end), ("weight", weight)):
        if isinstance(value, Tensor) and value.dtype != input.dtype:
            raise TypeError(f"lerp: {name} has dtype {value.dtype}, input {input.dtype}; they must be the same")
    return input + weight * (end - input)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """``input`` with NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf``; by default the
    infinities become the dtype's largest and lowest finite values (torch.nan_to_num). The gradient is
    zero where a value was replaced. Integer and bool tensors come back as a copy."""
    _expect_tensors("nan_to_num", input=input)
    if not input.is_floating_point():
        return input.clone()
    info = finfo(input.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    replaced = input.masked_fill(isnan(input), nan)
    return replaced.masked_fill(input == math.inf, posinf).masked_fill(input == -math.inf, neginf)


def clamp_min(input, min):
    """Elements below ``min`` (a number or a tensor) raised to it: ``clamp(input, min=min)``."""
    return input.clamp(min=min)


def clamp_max(input, max):
    """Elements above ``max`` (a number or a tensor) lowered to it: ``clamp(input, max=max)``."""
    return input.clamp(max=max)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Where ``|input - other| <= atol + rtol * |other|`` (broadcast), as a bool tensor: torch.isclose.
    Equal elements are close (so are infinities of one sign), NaN is close to nothing unless
    ``equal_nan``. Integer tensors are compared through float64. TypeError for tensors of two dtypes,
    ValueError for a negative tolerance."""
    _expect_tensors("isclose", input=input, other=other)
    if input.dtype != other.dtype:
        raise TypeError(f"isclose: input ({input.dtype}) and other ({other.dtype}) must have the same dtype")
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")
    close = input == other
    if input.is_floating_point():
        if equal_nan:
            close = close | (isnan(input) & isnan(other))
    else:
        input, other = input.double(), other.double()
    if rtol == 0 and atol == 0:
        return close  # equality alone: the finite test below would add nothing
    error = (input - other).abs()
    return close | (isfinite(error) & (error <= atol + rtol * other.abs()))


# ---- views and arrangement


def _mergeable(x, a, b):
    """Whether dims a and b of x, taken in that order, read as one strided dim without a copy."""
    return x.shape[a] <= 1 or x.shape[b] <= 1 or x.stride(a) == x.shape[b] * x.stride(b)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The elements (i, i + offset) of dims ``dim1`` and ``dim2``, which are removed, as a last dim
    (torch.diagonal): a positive offset is above the main diagonal, a negative one below.

    A view (writes through it land in ``input``) when the two dims merge into one strided dim: any
    contiguous tensor, its transposes and permutations, rows sliced from one or columns taken with a
    step. Otherwise, as for a corner sliced out of a larger matrix, a copy: ember's views cannot take
    arbitrary strides (it has no as_strided). Differentiable either way."""
    _expect_tensors("diagonal", input=input)
    ndim = input.dim()
    if ndim < 2:
        raise ValueError(f"diagonal: needs at least 2 dims, got shape {tuple(input.shape)}")
    d1, d2 = _wrap_dim(dim1, ndim, "diagonal"), _wrap_dim(dim2, ndim, "diagonal")
    if d1 == d2:
        raise ValueError(f"diagonal: dim1 ({dim1}) and dim2 ({dim2}) are the same dim")
    offset = _int(offset, "diagonal", "offset")
    # The transposed matrix, with the offset negated, has the same diagonal and may merge where this does not.
    if not _mergeable(input, d1, d2) and _mergeable(input, d2, d1):
        d1, d2, offset = d2, d1, -offset
    rows, cols = input.shape[d1], input.shape[d2]
    rest = [d for d in range(ndim) if d not in (d1, d2)]
    flat = input.permute(*rest, d1, d2).reshape(*[input.shape[d] for d in rest], rows * cols)
    # In the merged dim, (i, i + offset) lies at i * (cols + 1) + offset and (i - offset, i) at
    # i * (cols + 1) - offset * cols.
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    start = offset if offset >= 0 else -offset * cols
    return flat[..., start : start + length * (cols + 1) : cols + 1]


def diag(input, diagonal=0):
    """torch.diag: a 1-D input becomes a square matrix with it on the ``diagonal``-th diagonal (zeros
    elsewhere); a 2-D input gives that diagonal as a new 1-D tensor (a copy, not a view)."""
    _expect_tensors("diag", input=input)
    offset = _int(diagonal, "diag", "diagonal")
    if input.dim() == 2:
        return input.diagonal(offset).clone()
    if input.dim() != 1:
        raise ValueError(f"diag: expects a 1-D or 2-D tensor, got shape {tuple(input.shape)}")
    n = input.shape[0]
    size = n + abs(offset)
    start = offset if offset >= 0 else -offset * size
    positions = _ember.arange(start, start + n * (size + 1), size + 1, dtype=_ember.int64, device=input.device)
    out = _ember.zeros(size * size, dtype=input.dtype, device=input.device)
    return out.index_add(0, positions, input).reshape(size, size)


def trace(input):
    """The sum of the main diagonal of a 2-D tensor (torch.trace); integer sums are int64."""
    _expect_tensors("trace", input=input)
    if input.dim() != 2:
        raise ValueError(f"trace: expects a 2-D tensor, got shape {tuple(input.shape)}")
    return input.diagonal().sum()


def _dims(dims):
    return list(dims) if isinstance(dims, (list, tuple)) else [dims]


def movedim(input, source, destination):
    """A view with dims ``source`` (an int or a sequence) at positions ``destination``, the other dims
    keeping their order (torch.movedim). ValueError for sequences of two lengths or a repeated dim."""
    _expect_tensors("movedim", input=input)
    ndim = input.dim()
    src = [_wrap_dim(d, ndim, "movedim") for d in _dims(source)]
    dst = [_wrap_dim(d, ndim, "movedim") for d in _dims(destination)]
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {source} and destination {destination} must have the same length")
    for name, dims, given in (("source", src, source), ("destination", dst, destination)):
        if len(set(dims)) != len(dims):
            raise ValueError(f"movedim: {name} {given} names a dim more than once")
    if ndim == 0:
        return input
    order = [None] * ndim
    for s, d in zip(src, dst):
        order[d] = s
    others = iter(d for d in range(ndim) if d not in src)
    return input.permute(*[next(others) if o is None else o for o in order])


moveaxis = movedim


def outer(input, vec2):
    """The outer product of two 1-D tensors: ``out[i, j] = input[i] * vec2[j]`` (torch.outer)."""
    _expect_tensors("outer", input=input, vec2=vec2)
    if input.dim() != 1 or vec2.dim() != 1:
        raise ValueError(f"outer: expects two 1-D tensors, got shapes {tuple(input.shape)} and {tuple(vec2.shape)}")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``, input broadcast to the product's shape (torch.addmm).
    With ``beta=0`` input is ignored, so NaN and inf in it do not reach the result (torch's rule)."""
    _expect_tensors("addmm", input=input, mat1=mat1, mat2=mat2)
    product = _ember.mm(mat1, mat2)
    if alpha != 1:
        product = product * alpha
    base = input.broadcast_to(product.shape)  # ShapeError when input does not fit the product
    if beta == 0:
        return product
    return product + (base if beta == 1 else base * beta)


def repeat_interleave(input, repeats=None, dim=None):
    """Each element (slice along ``dim``) repeated ``repeats`` times, the copies side by side
    (torch.repeat_interleave): ``repeats`` is an int or a 1-D integer tensor with a count per element
    (one count serves all). Without ``dim``, over the flattened input. ``repeat_interleave(counts)``
    alone repeats each index ``i`` ``counts[i]`` times. A tensor of counts is read on the host (the
    result's size depends on it)."""
    _expect_tensors("repeat_interleave", input=input)
    if repeats is None:  # the counts alone: index i repeated counts[i] times
        input, repeats = _ember.arange(input.numel(), device=input.device), input
    if dim is None:
        input, dim = input.reshape(-1), 0
    elif input.dim() == 0:
        input = input.reshape(1)
    dim = _wrap_dim(dim, input.dim(), "repeat_interleave")
    shape, size = list(input.shape), input.shape[dim]
    if isinstance(repeats, Tensor):
        if repeats.is_floating_point() or repeats.dtype == _ember.bool:
            raise TypeError(f"repeat_interleave: repeats must be an integer tensor, got {repeats.dtype}")
        if repeats.dim() > 1 or (repeats.numel() != 1 and repeats.numel() != size):
            raise ValueError(f"repeat_interleave: repeats of shape {tuple(repeats.shape)} for dim {dim} of size "
                             f"{size}; expects one count or a 1-D tensor of one count per element")
        if repeats.numel() != 1:
            return input.index_select(dim, _interleave_index(repeats.tolist(), input.device))
        repeats = repeats.item()
    count = _count(repeats, "repeat_interleave", "repeats")
    expanded = input.unsqueeze(dim + 1).expand(*shape[: dim + 1], count, *shape[dim + 1 :])
    return expanded.reshape(*shape[:dim], size * count, *shape[dim + 1 :])


def _interleave_index(counts, device):
    """The index that repeats element i counts[i] times: 0, 0, 1, 2, 2, 2 for counts (2, 1, 3)."""
    for c in counts:
        _count(c, "repeat_interleave", "repeats")
    ends = list(itertools.accumulate(counts))
    total = ends[-1] if ends else 0
    positions = _ember.arange(total, dtype=_ember.int64, device=device)
    # Output position j belongs to element k, the number of block ends <= j. A stable sort of the ends
    # (first, so that an end equal to j sorts before it) together with the positions puts j at rank
    # j + k, and the positions come out in increasing order.
    keys = _ember.cat([_ember.tensor(ends, dtype=_ember.int64, device=device), positions])
    ranks = _ember.nonzero(keys.argsort(stable=True) >= len(counts)).reshape(-1)
    return ranks - positions


# ---- reductions


def _with_mean(reduce, input, dim, unbiased, keepdim, correction):
    return reduce(input, dim, unbiased, keepdim, correction=correction), _ember.mean(input, dim, keepdim)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)`` over ``dim`` (all dims by default) in one call (torch.var_mean): the variance
    divides by N - correction (1 by default; ``unbiased=False`` means 0)."""
    return _with_mean(_ember.var, input, dim, unbiased, keepdim, correction)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(std, mean)`` over ``dim`` (all dims by default), as var_mean with the standard deviation."""
    return _with_mean(_ember.std, input, dim, unbiased, keepdim, correction)


def count_nonzero(input, dim=None):
    """The number of nonzero elements over ``dim`` (an int or a tuple; all dims by default), as int64."""
    _expect_tensors("count_nonzero", input=input)
    return (input != 0).sum(dim)


# Named and shown as torch's result type; pickled through this module's _MinMax (ember.aminmax is the function).
_MinMax = collections.namedtuple("aminmax", ("min", "max"))
_MinMax.__qualname__ = "_MinMax"


def aminmax(input, *, dim=None, keepdim=False):
    """``(min, max)`` over ``dim`` (all elements by default) as a named tuple with ``.min`` and ``.max``
    (torch.aminmax); with ``keepdim`` and no dim, the results keep every dim as size 1."""
    _expect_tensors("aminmax", input=input)
    if dim is not None:
        dim = _wrap_dim(dim, input.dim(), "aminmax")
    return _MinMax(input.amin(dim, keepdim), input.amax(dim, keepdim))


# ---- random


def randperm(n, *, generator=None, dtype=_ember.int64, device=None):
    """A random permutation of 0 .. n-1 (torch.randperm): the order that sorts n uniform float64 draws
    from ``generator`` (the default one when None), so seeding makes it reproducible."""
    n = _count(n, "randperm", "n")
    draws = _ember.rand(n, generator=generator, dtype=_ember.float64, device=device)
    return draws.argsort(stable=True).to(dtype)


# ---- dtype information

# (exponent bits, mantissa bits) of the IEEE-style floating dtypes.
_FLOAT_LAYOUTS = {_ember.float64: (11, 52), _ember.float32: (8, 23), _ember.float16: (5, 10), _ember.bfloat16: (8, 7)}


def _dtype_name(dtype):
    return repr(dtype).split(".")[-1]


class finfo:
    """The numerical properties of a floating dtype (float32 by default), as torch.finfo: ``bits``,
    ``eps`` (1.0's distance to the next value), ``max``, ``min`` (-max), ``tiny`` and
    ``smallest_normal`` (the smallest positive normal number), ``resolution`` (10 ** -decimal digits)."""

    def __init__(self, type=None):
        type = _ember.float32 if type is None else type
        if not isinstance(type, _ember.dtype) or type not in _FLOAT_LAYOUTS:
            raise TypeError(f"finfo: expects a floating dtype ({', '.join(map(repr, _FLOAT_LAYOUTS))}), got {type!r}")
        exponent, mantissa = _FLOAT_LAYOUTS[type]
        self.dtype = _dtype_name(type)
        self.bits = 1 + exponent + mantissa
        self.eps = 2.0**-mantissa
        self.max = (2.0 - self.eps) * 2.0 ** (2 ** (exponent - 1) - 1)
        self.min = -self.max
        self.smallest_normal = self.tiny = 2.0 ** (2 - 2 ** (exponent - 1))
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """The range of an integer dtype, as torch.iinfo: ``bits``, ``min``, ``max``."""

    def __init__(self, type):
        if not isinstance(type, _ember.dtype) or type.is_floating_point or type == _ember.bool:
            raise TypeError(f"iinfo: expects an integer dtype (ember.uint8, int32, int64), got {type!r}")
        self.dtype = _dtype_name(type)
        self.bits = type.itemsize * 8
        self.min = -(2 ** (self.bits - 1)) if type.is_signed else 0
        self.max = 2 ** (self.bits - 1) - 1 if type.is_signed else 2**self.bits - 1

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


for _name, _fn in [
    ("lerp", lerp),
    ("nan_to_num", nan_to_num),
    ("clamp_min", clamp_min),
    ("clamp_max", clamp_max),
    ("isclose", isclose),
    ("diagonal", diagonal),
    ("diag", diag),
    ("trace", trace),
    ("movedim", movedim),
    ("moveaxis", moveaxis),
    ("outer", outer),
    ("addmm", addmm),
    ("repeat_interleave", repeat_interleave),
    ("count_nonzero", count_nonzero),
    ("aminmax", aminmax),
]:
    setattr(Tensor, _name, _fn)

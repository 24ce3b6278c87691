"""The PyTorch functions ember composes in Python (python/ember/_composed.py): each against a NumPy
float64 reference, as ember.NAME and as the Tensor method; the gradients of the differentiable ones
(gradcheck on float64); the view semantics of diagonal and movedim; finfo/iinfo against NumPy's and
torch's documented values; the memory formats; and the errors."""

import pickle

import numpy as np
import pytest

import ember
from conftest import assert_close, to_numpy


def _pair(shape, seed=0, dtype=ember.float32, low=-1.0, high=1.0):
    """A tensor of `dtype` and the float64 array of its (rounded) values."""
    t = ember.tensor(np.random.default_rng(seed).uniform(low, high, shape), dtype=dtype)
    return t, to_numpy(t)


def _leaf(shape, seed=0):
    return ember.tensor(np.random.default_rng(seed).uniform(-1, 1, shape), dtype=ember.float64, requires_grad=True)


def _gradcheck(fn, *shapes):
    assert ember.autograd.gradcheck(fn, [_leaf(shape, seed) for seed, shape in enumerate(shapes)])


# ---- values


@pytest.mark.parametrize("weight_kind", ["number", "tensor"])
def test_lerp_against_numpy(weight_kind):
    start, a = _pair((3, 4))
    end, b = _pair((4,), seed=1)  # broadcast against start
    if weight_kind == "number":
        weight, w = 0.3, 0.3
    else:
        weight, w = _pair((3, 1), seed=2, low=0, high=1)
    assert_close(ember.lerp(start, end, weight), a + w * (b - a))
    assert_close(start.lerp(end, weight), a + w * (b - a))
    assert ember.lerp(start.half(), end.half(), 0.5).dtype is ember.float16


def test_lerp_gradients():
    _gradcheck(lambda s, e, w: ember.lerp(s, e, w), (3, 4), (3, 4), (3, 4))
    _gradcheck(lambda s, e: s.lerp(e, 0.25), (2, 3), (3,))


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
def test_nan_to_num_against_numpy(dtype):
    values = [1.5, float("nan"), float("inf"), -float("inf"), -2.0]
    t = ember.tensor(values, dtype=dtype)
    info = ember.finfo(dtype)
    expected = np.nan_to_num(np.array(values), posinf=info.max, neginf=info.min)
    np.testing.assert_array_equal(to_numpy(ember.nan_to_num(t)), expected)
    custom = t.nan_to_num(nan=7.0, posinf=100.0, neginf=-100.0)
    np.testing.assert_array_equal(to_numpy(custom), [1.5, 7.0, 100.0, -100.0, -2.0])


def test_nan_to_num_keeps_integers_and_zeroes_the_gradient_where_it_replaces():
    ints = ember.tensor([1, -2, 3])
    out = ember.nan_to_num(ints)
    assert out.tolist() == [1, -2, 3] and out.dtype is ember.int64 and not out.is_same(ints)
    x = ember.tensor([1.0, float("nan"), float("inf"), 2.0], dtype=ember.float64, requires_grad=True)
    (ember.nan_to_num(x) * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 0.0, 0.0, 3.0]
    _gradcheck(ember.nan_to_num, (2, 3))


def test_clamp_min_and_clamp_max_against_numpy():
    t, a = _pair((3, 4))
    bound, b = _pair((4,), seed=1)
    assert_close(ember.clamp_min(t, 0.2), np.maximum(a, 0.2))
    assert_close(t.clamp_min(bound), np.maximum(a, b))
    assert_close(ember.clamp_max(t, bound), np.minimum(a, b))
    assert_close(t.clamp_max(-0.1), np.minimum(a, -0.1))
    _gradcheck(lambda x: x.clamp_min(0.1) + x.clamp_max(-0.2), (3, 4))


@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_against_numpy(equal_nan):
    a = np.array([1.0, 1.0, 0.0, np.nan, np.inf, np.inf, -np.inf, 1e-9, 100.0])
    b = np.array([1.0 + 5e-6, 1.1, 1e-9, np.nan, np.inf, -np.inf, -np.inf, 0.0, 100.0009])
    x, y = ember.tensor(a, dtype=ember.float64), ember.tensor(b, dtype=ember.float64)
    expected = np.isclose(a, b, equal_nan=equal_nan)
    assert ember.isclose(x, y, equal_nan=equal_nan).tolist() == expected.tolist()
    assert x.isclose(y, rtol=1e-3, atol=0.0, equal_nan=equal_nan).tolist() == np.isclose(
        a, b, rtol=1e-3, atol=0.0, equal_nan=equal_nan).tolist()
    assert ember.isclose(x, y, rtol=0, atol=0).tolist() == (a == b).tolist()


def test_isclose_broadcasts_and_compares_integers():
    t, a = _pair((2, 3))
    close = ember.isclose(t, t[0] + 1e-7)
    assert close.dtype is ember.bool
    assert close.tolist() == np.isclose(a, a[0] + 1e-7).tolist()
    ints = ember.tensor([100000, 100001, 5])
    assert ember.isclose(ints, ember.tensor([100000, 100000, 6]), rtol=1e-5).tolist() == [True, True, False]


# ---- views and arrangement


@pytest.mark.parametrize(
    "shape,offset,dim1,dim2",
    [((3, 4), 0, 0, 1), ((3, 4), 1, 0, 1), ((3, 4), -2, 0, 1), ((4, 3), 2, 1, 0), ((3, 4), 9, 0, 1),
     ((3, 4), -9, 0, 1), ((2, 3, 4), 1, 1, 2), ((2, 3, 4), -1, 2, 0), ((2, 3, 4, 5), 0, -1, 1), ((0, 3), 0, 0, 1)],
)
def test_diagonal_against_numpy(shape, offset, dim1, dim2):
    t, a = _pair(shape)
    expected = np.diagonal(a, offset, dim1, dim2)
    got = t.diagonal(offset, dim1, dim2)
    assert tuple(got.shape) == expected.shape
    assert_close(got, expected)
    assert_close(ember.diagonal(t, offset=offset, dim1=dim1, dim2=dim2), expected)


@pytest.mark.parametrize(
    "make",
    [lambda: ember.zeros(3, 4), lambda: ember.zeros(4, 3).T, lambda: ember.zeros(2, 3, 4).permute(2, 0, 1),
     lambda: ember.zeros(5, 4)[1:4], lambda: ember.zeros(3, 8)[:, ::2]],
)
def test_diagonal_is_a_view_of_mergeable_inputs(make):
    x = make()
    d = x.diagonal(1, -2, -1) if x.dim() == 3 else x.diagonal(1)
    d.fill_(5.0)
    assert (x == 5.0).sum().item() == d.numel() > 0  # the writes landed in x, and only on the diagonal
    expected = np.diagonal(to_numpy(x), 1, -2, -1) if x.dim() == 3 else np.diagonal(to_numpy(x), 1)
    assert (expected == 5.0).all()


def test_diagonal_of_a_corner_is_a_correct_copy():
    base = ember.arange(20.0).reshape(4, 5)
    corner = base[:3, :3]  # rows 5 apart, 3 wide: no single stride reaches (i, i)
    d = corner.diagonal()
    assert d.tolist() == [0.0, 6.0, 12.0]
    d.fill_(-1.0)
    assert base[0, 0].item() == 0.0  # a copy, as the docstring says


def test_diagonal_diag_and_trace_gradients():
    _gradcheck(lambda x: x.diagonal(1) * ember.arange(1.0, 4.0, dtype=ember.float64), (3, 5))
    _gradcheck(lambda x: x.T.diagonal(-1, 0, 1), (4, 3))
    _gradcheck(lambda x: ember.diag(x, -1), (3,))
    _gradcheck(lambda x: ember.diag(x, 2), (3, 4))
    _gradcheck(ember.trace, (3, 4))


@pytest.mark.parametrize("k", [-2, 0, 1, 3])
def test_diag_and_trace_against_numpy(k):
    v, a = _pair((3,))
    assert_close(ember.diag(v, k), np.diag(a, k))
    assert_close(v.diag(diagonal=k), np.diag(a, k))
    m, b = _pair((3, 4), seed=1)
    assert_close(ember.diag(m, k), np.diag(b, k))
    assert_close(ember.trace(m), np.trace(b), rtol=1e-6, atol=1e-6)
    assert m.trace().dim() == 0
    assert ember.arange(9, dtype=ember.int32).reshape(3, 3).trace().item() == 12


def test_diag_of_a_matrix_is_a_copy_and_keeps_the_dtype():
    m = ember.arange(9).reshape(3, 3)
    d = ember.diag(m)
    d.fill_(-1)
    assert m.diagonal().tolist() == [0, 4, 8]
    assert ember.diag(ember.tensor([1, 2])).dtype is ember.int64
    assert ember.diag(ember.tensor([True, False])).tolist() == [[True, False], [False, False]]


@pytest.mark.parametrize(
    "source,destination", [(0, 2), (-1, 0), ((0, 1), (2, 3)), ([3, 0], [0, 3]), ((), ()), ((1, 2, 3), (0, 1, 2))]
)
def test_movedim_against_numpy(source, destination):
    t, a = _pair((2, 3, 4, 5))
    expected = np.moveaxis(a, source, destination)
    for fn in (ember.movedim, ember.moveaxis, ember.Tensor.movedim, ember.Tensor.moveaxis):
        got = fn(t, source, destination)
        assert tuple(got.shape) == expected.shape
        assert_close(got, expected)


def test_movedim_is_a_view():
    x = ember.zeros(2, 3, 4)
    ember.movedim(x, 2, 0)[1, 0, 2] = 7.0
    assert x[0, 2, 1].item() == 7.0
    weights = ember.arange(24.0, dtype=ember.float64).reshape(4, 3, 2)
    _gradcheck(lambda x: x.movedim((0, 2), (2, 0)) * weights, (2, 3, 4))
    assert ember.movedim(ember.tensor(3.0), 0, -1).item() == 3.0


def test_outer_against_numpy():
    u, a = _pair((3,))
    v, b = _pair((4,), seed=1)
    assert_close(ember.outer(u, v), np.outer(a, b))
    assert_close(u.outer(v), np.outer(a, b))
    _gradcheck(ember.outer, (3,), (2,))


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1), (2, 0)])
@pytest.mark.parametrize("bias_shape", [(3, 5), (5,), (1, 5)])
def test_addmm_against_numpy(beta, alpha, bias_shape):
    bias, c = _pair(bias_shape)
    m1, a = _pair((3, 4), seed=1)
    m2, b = _pair((4, 5), seed=2)
    expected = beta * c + alpha * (a @ b)
    assert_close(ember.addmm(bias, m1, m2, beta=beta, alpha=alpha), expected, rtol=1e-5, atol=1e-5)
    assert_close(bias.addmm(m1, m2, beta=beta, alpha=alpha), expected, rtol=1e-5, atol=1e-5)


def test_addmm_with_beta_zero_ignores_nan_in_input_and_is_differentiable():
    bias = ember.full((2, 2), float("nan"))
    out = ember.addmm(bias, ember.eye(2), ember.eye(2), beta=0)
    assert out.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    _gradcheck(lambda i, a, b: ember.addmm(i, a, b, beta=0.5, alpha=-2.0), (3,), (2, 4), (4, 3))


@pytest.mark.parametrize(
    "repeats,dim",
    [(2, None), (0, None), (2, 0), (3, 1), (2, -1), ([1, 0, 3], 0), ([1, 0, 3], 1), ([2], 1), ([2], None),
     ([1, 0, 2, 0, 1, 0, 2, 1, 1], None)],
)
def test_repeat_interleave_against_numpy(repeats, dim):
    t, a = _pair((3, 3))
    r = repeats if isinstance(repeats, int) else ember.tensor(repeats)
    expected = np.repeat(a, repeats, axis=dim)
    got = ember.repeat_interleave(t, r, dim=dim)
    assert tuple(got.shape) == expected.shape
    assert_close(got, expected)
    assert_close(t.repeat_interleave(r, dim), expected)


def test_repeat_interleave_of_counts_alone_and_its_gradients():
    assert ember.repeat_interleave(ember.tensor([2, 0, 3])).tolist() == [0, 0, 2, 2, 2]
    assert ember.repeat_interleave(ember.tensor([], dtype=ember.int64)).tolist() == []
    assert ember.tensor(5).repeat_interleave(3).tolist() == [5, 5, 5]
    counts = ember.tensor([3, 1, 0, 2])
    _gradcheck(lambda x: x.repeat_interleave(counts, dim=1) * 1.5, (2, 4))
    _gradcheck(lambda x: x.repeat_interleave(2, dim=0), (2, 3))


@pytest.mark.parametrize("memory_format", ["channels_last", "contiguous_format"])
def test_contiguous_and_to_in_a_memory_format(memory_format):
    fmt = getattr(ember, memory_format)
    t, a = _pair((2, 3, 4, 5))
    nhwc_strides = (60, 1, 15, 3)
    for got in (t.contiguous(memory_format=fmt), t.to(memory_format=fmt), t.to(ember.float64, memory_format=fmt)):
        assert_close(got, a)
        assert got.stride() == (nhwc_strides if fmt is ember.channels_last else (60, 20, 5, 1))
        assert got.is_contiguous(memory_format=fmt)
    nhwc = t.contiguous(memory_format=ember.channels_last)
    assert not nhwc.is_contiguous() and not t.is_contiguous(memory_format=ember.channels_last)
    assert nhwc.contiguous(memory_format=ember.channels_last).is_same(nhwc)  # already so: itself
    assert nhwc.contiguous().stride() == (60, 20, 5, 1)
    assert nhwc.to(ember.float16).stride() == nhwc_strides  # a conversion keeps the layout (preserve_format)


def test_memory_format_details():
    both = ember.zeros(2, 1, 3, 3)  # one channel: NCHW and NHWC strides agree, as in torch
    assert both.is_contiguous() and both.is_contiguous(memory_format=ember.channels_last)
    assert not ember.zeros(2, 3).is_contiguous(memory_format=ember.channels_last)
    assert repr(ember.channels_last) == "ember.channels_last"
    x = _leaf((2, 3, 2, 2))
    (x.contiguous(memory_format=ember.channels_last) * 2).sum().backward()
    assert x.grad.tolist() == ember.full((2, 3, 2, 2), 2.0).tolist()
    assert ember.ones(3).to().tolist() == [1.0, 1.0, 1.0]
    assert ember.ones(3).to(dtype=ember.int64, copy=True).dtype is ember.int64
    assert ember.ones(3).to("cpu", ember.float64).dtype is ember.float64
    assert ember.ones(3).to(other=ember.zeros(1, dtype=ember.float16)).dtype is ember.float16


# ---- reductions


@pytest.mark.parametrize(
    "dim,keepdim,kwargs,ddof",
    [(None, False, {}, 1), (1, False, {}, 1), ((0, 2), True, {}, 1), (0, False, {"correction": 0}, 0),
     (-1, True, {"unbiased": False}, 0), (None, False, {"correction": 2}, 2)],
)
def test_var_mean_and_std_mean_against_numpy(dim, keepdim, kwargs, ddof):
    t, a = _pair((3, 4, 5))
    axis = tuple(dim) if isinstance(dim, tuple) else dim
    for fn, reference in ((ember.var_mean, np.var), (ember.std_mean, np.std)):
        result = fn(t, dim, keepdim=keepdim, **kwargs)
        assert isinstance(result, tuple) and len(result) == 2
        spread, mean = result
        assert_close(spread, reference(a, axis=axis, ddof=ddof, keepdims=keepdim), rtol=1e-5, atol=1e-6)
        assert_close(mean, np.mean(a, axis=axis, keepdims=keepdim), rtol=1e-5, atol=1e-6)
    _gradcheck(lambda x: sum(v * (i + 1) for i, v in enumerate(ember.var_mean(x, 1))), (3, 4))
    _gradcheck(lambda x: sum(v * (i + 1) for i, v in enumerate(ember.std_mean(x, 0, correction=0))), (3, 4))


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1), -1])
def test_count_nonzero_against_numpy(dim):
    a = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    for t in (ember.tensor(a), ember.tensor(a).int(), ember.tensor(a).bool()):
        got = ember.count_nonzero(t, dim)
        assert got.dtype is ember.int64
        assert np.array_equal(to_numpy(got), np.count_nonzero(a, axis=dim))
        assert np.array_equal(to_numpy(t.count_nonzero(dim=dim)), np.count_nonzero(a, axis=dim))


@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (0, False), (-1, True)])
def test_aminmax_against_numpy(dim, keepdim):
    t, a = _pair((3, 4))
    result = ember.aminmax(t, dim=dim, keepdim=keepdim)
    low, high = result
    assert result.min is low and result.max is high
    expected_low = np.min(a, axis=dim, keepdims=keepdim)
    assert tuple(low.shape) == np.shape(expected_low)
    assert_close(low, expected_low)
    assert_close(high, np.max(a, axis=dim, keepdims=keepdim))
    assert t.aminmax(dim=dim, keepdim=keepdim).max.tolist() == high.tolist()
    assert repr(result).startswith("aminmax(min=")
    assert pickle.loads(pickle.dumps(result)).max.tolist() == high.tolist()


# ---- random


def test_randperm_is_a_seeded_permutation():
    p = ember.randperm(50)
    assert p.dtype is ember.int64 and sorted(p.tolist()) == list(range(50))
    assert p.tolist() != list(range(50))  # one chance in 50! of a false failure
    a = ember.randperm(20, generator=ember.Generator(5)).tolist()
    assert a == ember.randperm(20, generator=ember.Generator(5)).tolist()
    assert a != ember.randperm(20, generator=ember.Generator(6)).tolist()
    ember.manual_seed(3)
    b = ember.randperm(10, dtype=ember.int32)
    ember.manual_seed(3)
    assert b.dtype is ember.int32 and b.tolist() == ember.randperm(10, dtype=ember.int32).tolist()
    assert ember.randperm(0).tolist() == []


# ---- dtype information


@pytest.mark.parametrize(
    "dtype,numpy_dtype", [(ember.float16, np.float16), (ember.float32, np.float32), (ember.float64, np.float64)]
)
def test_finfo_matches_numpy(dtype, numpy_dtype):
    got, want = ember.finfo(dtype), np.finfo(numpy_dtype)
    assert got.bits == want.bits
    for name in ("eps", "max", "min", "tiny", "smallest_normal"):
        assert getattr(got, name) == float(getattr(want, name)), name
    assert got.resolution == 10.0**-want.precision  # NumPy keeps it rounded to the dtype, torch as a float
    assert got.dtype == np.dtype(numpy_dtype).name


def test_finfo_of_bfloat16_and_the_default_match_torch():
    # torch.finfo(torch.bfloat16)'s documented values.
    info = ember.finfo(ember.bfloat16)
    assert (info.bits, info.eps, info.max, info.min) == (16, 0.0078125, 3.3895313892515355e38, -3.3895313892515355e38)
    assert info.tiny == info.smallest_normal == 1.1754943508222875e-38 and info.resolution == 0.01
    assert ember.finfo().eps == ember.finfo(ember.float32).eps == 1.1920928955078125e-07
    assert "float32" in repr(ember.finfo())


@pytest.mark.parametrize(
    "dtype,numpy_dtype", [(ember.uint8, np.uint8), (ember.int32, np.int32), (ember.int64, np.int64)]
)
def test_iinfo_matches_numpy(dtype, numpy_dtype):
    got, want = ember.iinfo(dtype), np.iinfo(numpy_dtype)
    assert (got.bits, got.min, got.max) == (want.bits, want.min, want.max)
    assert got.dtype == np.dtype(numpy_dtype).name


# ---- errors


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda t: ember.lerp(t.int(), t.int(), 0.5), TypeError, ["lerp", "floating", "int32"]),
        (lambda t: ember.lerp(t, t.double(), 0.5), TypeError, ["end", "float64", "float32"]),
        (lambda t: ember.lerp(t, 1.0, 0.5), TypeError, ["end", "float"]),
        (lambda t: ember.isclose(t, t.double()), TypeError, ["isclose", "float32", "float64"]),
        (lambda t: ember.isclose(t, t, rtol=-1.0), ValueError, ["rtol=-1.0"]),
        (lambda t: ember.diagonal(t[0]), ValueError, ["diagonal", "at least 2 dims", "(3,)"]),
        (lambda t: t.diagonal(0, 1, -1), ValueError, ["same dim", "1", "-1"]),
        (lambda t: t.diagonal(0, 0, 2), IndexError, ["diagonal", "dim 2", "2 dims"]),
        (lambda t: t.diagonal(0.5), TypeError, ["diagonal", "offset", "0.5"]),
        (lambda t: ember.diag(t.reshape(1, 2, 3)), ValueError, ["diag", "(1, 2, 3)"]),
        (lambda t: ember.trace(t[0]), ValueError, ["trace", "2-D", "(3,)"]),
        (lambda t: ember.movedim(t, (0, 1), 0), ValueError, ["movedim", "same length"]),
        (lambda t: ember.movedim(t, (0, 0), (0, 1)), ValueError, ["source", "more than once"]),
        (lambda t: ember.movedim(t, 2, 0), IndexError, ["movedim", "dim 2"]),
        (lambda t: ember.movedim(t, 0.5, 0), TypeError, ["movedim", "0.5"]),
        (lambda t: ember.outer(t, t[0]), ValueError, ["outer", "1-D", "(2, 3)"]),
        (lambda t: ember.outer(t[0], [1.0]), TypeError, ["outer", "vec2", "list"]),
        (lambda t: ember.addmm(t, t, t), ember.ShapeError, []),
        (lambda t: ember.addmm(ember.zeros(4), t, t.T), ember.ShapeError, ["(2, 2)"]),
        (lambda t: ember.repeat_interleave(t, -1), ValueError, ["repeats", "-1"]),
        (lambda t: ember.repeat_interleave(t, ember.tensor([1, -2]), dim=0), ValueError, ["repeats", "-2"]),
        (lambda t: ember.repeat_interleave(t, ember.tensor([1, 2]), dim=1), ValueError, ["(2,)", "dim 1", "size 3"]),
        (lambda t: ember.repeat_interleave(t, ember.tensor([1.0, 2.0]), dim=0), TypeError, ["integer", "float32"]),
        (lambda t: ember.repeat_interleave(t, 1.5), TypeError, ["repeats", "1.5"]),
        (lambda t: ember.repeat_interleave(t, 2, dim=2), IndexError, ["dim 2"]),
        (lambda t: ember.aminmax(t, dim=3), IndexError, ["aminmax", "dim 3"]),
        (lambda t: ember.aminmax(ember.zeros(0)), ember.IndexError, ["size 0"]),
        (lambda t: ember.var_mean(t.int()), ember.Error, []),
        (lambda t: ember.randperm(-1), ValueError, ["randperm", "-1"]),
        (lambda t: ember.randperm(2.5), TypeError, ["randperm", "2.5"]),
        (lambda t: ember.finfo(ember.int32), TypeError, ["finfo", "ember.int32"]),
        (lambda t: ember.iinfo(ember.float32), TypeError, ["iinfo", "ember.float32"]),
        (lambda t: ember.iinfo(ember.bool), TypeError, ["iinfo", "ember.bool"]),
        (lambda t: t.contiguous(memory_format=ember.channels_last), ValueError, ["channels_last", "4-D", "(2, 3)"]),
        (lambda t: t.to(ember.float64, memory_format=ember.channels_last), ValueError, ["to", "4-D"]),
        (lambda t: t.contiguous(memory_format=ember.preserve_format), ValueError, ["preserve_format"]),
        (lambda t: t.contiguous(memory_format="channels_last"), TypeError, ["contiguous", "memory_format"]),
        (lambda t: t.is_contiguous(memory_format=None), TypeError, ["is_contiguous", "memory_format"]),
        (lambda t: t.to(ember.float64, nonsense=True), TypeError, ["to"]),
    ],
)
def test_errors(call, error, words):
    with pytest.raises(error) as info:
        call(ember.zeros(2, 3))
    for word in words:
        assert word in str(info.value)

"""Every op family the bindings expose, against float64 NumPy references computed from the same
(already rounded) inputs: elementwise unary and binary (broadcasting, Python scalars on either side,
reflected and in-place operators), comparisons, reductions, matmul and the shape ops."""

import math

import numpy as np
import pytest

import ember
from conftest import ATOL, FLOAT_DTYPES, RTOL, assert_close, to_numpy

_erf = np.vectorize(math.erf)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name, reference, input range (low, high)
UNARY = [
    ("neg", lambda x: -x, (-3, 3)),
    ("abs", np.abs, (-3, 3)),
    ("sign", np.sign, (-3, 3)),
    ("exp", np.exp, (-3, 3)),
    ("log", np.log, (0.1, 5)),
    ("log1p", np.log1p, (-0.5, 3)),
    ("sqrt", np.sqrt, (0.01, 5)),
    ("rsqrt", lambda x: 1 / np.sqrt(x), (0.1, 5)),
    ("sin", np.sin, (-3, 3)),
    ("cos", np.cos, (-3, 3)),
    ("tanh", np.tanh, (-3, 3)),
    ("sigmoid", _sigmoid, (-5, 5)),
    ("relu", lambda x: np.maximum(x, 0), (-3, 3)),
    ("silu", lambda x: x * _sigmoid(x), (-4, 4)),
    ("erf", _erf, (-2, 2)),
    ("reciprocal", lambda x: 1 / x, (0.5, 4)),
    ("square", np.square, (-3, 3)),
]


def _input(rng, shape, low, high, dtype):
    """A tensor of dtype and the float64 NumPy array of exactly its (rounded) values."""
    t = ember.tensor(rng.uniform(low, high, shape), dtype=ember.float64).to(dtype)
    return t, to_numpy(t)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=repr)
@pytest.mark.parametrize("name,ref,domain", UNARY, ids=[u[0] for u in UNARY])
def test_unary_methods_and_functions(rng, dtype, name, ref, domain):
    t, x = _input(rng, (4, 5), *domain, dtype)
    expected = ref(x)
    method = getattr(t, name)()
    function = getattr(ember, name)(t)
    assert method.dtype is dtype and method.shape == (4, 5)
    assert_close(method, expected)
    assert ember.equal(method, function)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=repr)
def test_gelu_both_forms(rng, dtype):
    t, x = _input(rng, (50,), -4, 4, dtype)
    assert_close(t.gelu(), 0.5 * x * (1 + _erf(x / math.sqrt(2))))
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    assert_close(ember.gelu(t, approximate="tanh"), tanh_form)
    with pytest.raises(ember.ValueError):
        t.gelu(approximate="cubic")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=repr)
def test_isnan_isinf_isfinite_against_numpy(dtype):
    values = [0.0, -1.5, np.nan, np.inf, -np.inf, 3e4, -0.0]
    x = ember.tensor(values, dtype=dtype)
    ref = np.array(values)
    for name in ("isnan", "isinf", "isfinite"):
        got = getattr(ember, name)(x)
        assert got.dtype is ember.bool and got.tolist() == getattr(np, name)(ref).tolist(), name
        assert getattr(x, name)().tolist() == got.tolist()
    for exact in (ember.tensor([1, -2]), ember.tensor([True, False])):
        assert ember.isnan(exact).tolist() == ember.isinf(exact).tolist() == [False, False]
        assert ember.isfinite(exact).tolist() == [True, True]


def test_unary_on_integers_promotes_like_torch():
    i = ember.tensor([1, 4, 9])
    assert i.sqrt().dtype is ember.float32 and i.sqrt().tolist() == [1.0, 2.0, 3.0]
    assert (-i).dtype is ember.int64 and abs(-i).tolist() == [1, 4, 9]


def test_clamp_pow_logical_not(rng):
    t, x = _input(rng, (3, 4), -2, 2, ember.float64)
    assert_close(t.clamp(-0.5, 0.5), np.clip(x, -0.5, 0.5))
    assert_close(t.clamp(min=0), np.maximum(x, 0))
    assert_close(ember.clip(t, max=0.1), np.minimum(x, 0.1))
    lo, hi = ember.full((4,), -0.2, dtype=ember.float64), ember.full((3, 1), 0.3, dtype=ember.float64)
    assert_close(t.clamp(lo, hi), np.minimum(np.maximum(x, -0.2), 0.3))
    assert_close(t.abs().pow(1.5), np.abs(x) ** 1.5)
    assert_close(ember.pow(t.abs(), ember.full((4,), 2.0, dtype=ember.float64)), np.abs(x) ** 2)
    assert ember.tensor([0, 3]).logical_not().tolist() == [True, False]
    with pytest.raises(ember.ValueError):
        t.clamp()


BINARY = [
    ("add", "__add__", np.add),
    ("sub", "__sub__", np.subtract),
    ("mul", "__mul__", np.multiply),
    ("div", "__truediv__", np.divide),
    ("maximum", None, np.maximum),
    ("minimum", None, np.minimum),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=repr)
@pytest.mark.parametrize("name,dunder,ref", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1, 4), (2, 1)), ((4,), (5, 1)), ((), (2, 3))])
def test_binary_broadcasting(rng, dtype, name, dunder, ref, shapes):
    a, x = _input(rng, shapes[0], 0.5, 3, dtype)
    b, y = _input(rng, shapes[1], 0.5, 3, dtype)
    out = getattr(ember, name)(a, b)
    assert out.shape == np.broadcast_shapes(shapes[0], shapes[1]) and out.dtype is dtype
    assert_close(out, ref(x, y))
    assert ember.equal(getattr(a, name)(b), out)
    if dunder:
        assert ember.equal(getattr(a, dunder)(b), out)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=repr)
def test_operators_with_python_scalars_and_reflected(rng, dtype):
    t, x = _input(rng, (2, 3), 0.5, 3, dtype)
    # A Python number does not widen a float tensor (torch's wrapped-number rule).
    cases = [
        (t + 2, x + 2), (2 + t, 2 + x), (t - 1.5, x - 1.5), (1 - t, 1 - x), (t * 3, x * 3), (3 * t, 3 * x),
        (t / 4, x / 4), (4 / t, 4 / x), (t ** 2, x ** 2), (2 ** t, 2 ** x), (-t, -x), (+t, x), (abs(-t), x),
    ]
    for got, expected in cases:
        assert got.dtype is dtype
        assert_close(got, expected, dtype)
    assert_close(t // 0.7, np.floor(x / 0.7), dtype, atol=1)  # a quotient within rounding of an integer may differ
    assert_close(t % 0.7, x - np.floor(x / 0.7) * 0.7, dtype, atol=0.7 * RTOL[dtype] * 8 + ATOL[dtype])


def test_numpy_scalars_act_as_numbers():
    t = ember.tensor([1.0, 2.0])
    for got in (np.float64(2) * t, t * np.float32(2), np.int64(2) * t, t + np.float16(0)):
        assert isinstance(got, ember.Tensor) and got.dtype is ember.float32
    assert (np.float64(2) * t).tolist() == [2.0, 4.0]
    assert (t > np.float32(1.5)).tolist() == [False, True]


def test_floor_division_and_remainder_follow_python(rng):
    a = ember.tensor([7, -7, 7, -7, 0])
    b = ember.tensor([2, 2, -2, -2, 3])
    av, bv = [7, -7, 7, -7, 0], [2, 2, -2, -2, 3]
    assert (a // b).tolist() == [p // q for p, q in zip(av, bv)]
    assert (a % b).tolist() == [p % q for p, q in zip(av, bv)]
    assert (a % 3).tolist() == [p % 3 for p in av] and (17 % ember.tensor([5, -5])).tolist() == [2, -3]
    assert (ember.tensor([7.5, -7.5]) // 2).tolist() == [3.0, -4.0]
    f, x = _input(rng, (100,), -10, 10, ember.float64)
    assert_close(ember.remainder(f, 3.0), np.remainder(x, 3.0))
    assert_close(ember.floor_divide(f, 3.0), np.floor_divide(x, 3.0))
    assert ember.div(ember.tensor([-7.0]), 2, rounding_mode="trunc").tolist() == [-3.0]
    assert ember.div(ember.tensor([-7]), ember.tensor([2]), rounding_mode="floor").tolist() == [-4]
    assert ember.true_divide(ember.tensor([1]), ember.tensor([2])).tolist() == [0.5]


def test_integer_arithmetic_and_promotion():
    i = ember.tensor([1, 2, 3])
    assert (i + 1).dtype is ember.int64 and (i * 2).tolist() == [2, 4, 6]
    assert (i / 2).dtype is ember.float32 and (i / 2).tolist() == [0.5, 1.0, 1.5]
    assert (i + 0.5).dtype is ember.float32
    assert (i.int() + i).dtype is ember.int64
    assert (ember.ones(2, dtype=ember.float16) * 0.1).dtype is ember.float16
    assert (ember.ones(2, dtype=ember.float16) + ember.ones(2)).dtype is ember.float32
    assert ember.result_type(ember.ones(1, dtype=ember.int32), ember.ones(1, dtype=ember.float16)) is ember.float16
    assert ember.promote_types(ember.uint8, ember.int32) is ember.int32


def test_add_sub_alpha():
    a, b = ember.tensor([1.0, 2.0]), ember.tensor([10.0, 20.0])
    assert ember.add(a, b, alpha=2).tolist() == [21.0, 42.0]
    assert a.sub(b, alpha=0.5).tolist() == [-4.0, -8.0]
    with pytest.raises(ember.DTypeError):
        ember.add(ember.tensor([1]), ember.tensor([2]), alpha=0.5)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16, ember.int64, ember.int32, ember.uint8])
def test_comparisons_are_elementwise_bool(rng, dtype):
    x = ember.tensor(rng.integers(0, 5, (3, 4)), dtype=dtype)
    y = ember.tensor(rng.integers(0, 5, (4,)), dtype=dtype)
    a, b = to_numpy(x), to_numpy(y)
    for got, expected in [
        (x == y, a == b), (x != y, a != b), (x < y, a < b), (x <= y, a <= b), (x > y, a > b), (x >= y, a >= b),
        (x == 2, a == 2), (x < 2, a < 2), (2 < x, 2 < a), (x.ge(3), a >= 3), (ember.ne(x, y), a != b),
    ]:
        assert got.dtype is ember.bool and got.shape == expected.shape
        np.testing.assert_array_equal(np.asarray(got), expected)
    assert (x == "a") is False and (x != None) is True  # noqa: E711  (not a tensor operand: identity)


def test_bool_operators_and_logical_functions():
    p, q = ember.tensor([True, True, False, False]), ember.tensor([True, False, True, False])
    assert (p & q).tolist() == [True, False, False, False]
    assert (p | q).tolist() == [True, True, True, False]
    assert (p ^ q).tolist() == [False, True, True, False]
    assert (~p).tolist() == [False, False, True, True]
    assert ember.logical_and(ember.tensor([1, 0]), ember.tensor([2, 2])).tolist() == [True, False]
    with pytest.raises(ember.NotImplementedError):
        ember.tensor([1]) & ember.tensor([1])


def test_where_and_masked_fill(rng):
    t, x = _input(rng, (3, 4), -1, 1, ember.float64)
    cond = t > 0
    assert_close(ember.where(cond, t, ember.zeros_like(t)), np.where(x > 0, x, 0))
    assert_close(ember.where(cond, t, -1.0), np.where(x > 0, x, -1))
    assert_close(ember.where(cond, 1.0, 0.0), np.where(x > 0, 1.0, 0.0))
    assert_close(t.where(cond, 5.0), np.where(x > 0, x, 5))
    assert_close(t.masked_fill(cond, 9.0), np.where(x > 0, 9.0, x))
    assert_close(t.masked_fill(cond, ember.tensor(2.0, dtype=ember.float64)), np.where(x > 0, 2.0, x))
    with pytest.raises(ember.DTypeError):
        ember.where(t, t, t)


def test_in_place_operators_keep_the_object():
    t = ember.ones(2, 3)
    ptr, obj = t.data_ptr(), t
    t += 1
    t -= ember.full((3,), 0.5)
    t *= 4
    t /= 2
    assert t is obj and t.data_ptr() == ptr
    assert t.tolist() == [[3.0] * 3] * 2
    view = t[0]
    view += 10  # through a view
    assert t.tolist() == [[13.0] * 3, [3.0] * 3]
    i = ember.tensor([1, 2])
    with pytest.raises(ember.DTypeError):
        i += 0.5  # int64 cannot hold the float result


def test_in_place_methods_return_self():
    t = ember.zeros(2, 2)
    assert t.add_(1) is t and t.add_(ember.ones(2), alpha=2) is t
    assert t.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert t.mul_(2).sub_(1).div_(5) is t and t.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert t.fill_(4).tolist() == [[4.0, 4.0]] * 2 and t.zero_().tolist() == [[0.0, 0.0]] * 2
    assert t.fill_(ember.tensor(2.5)).tolist() == [[2.5, 2.5]] * 2
    src = ember.tensor([1.0, 2.0], dtype=ember.float64)
    assert t.copy_(src) is t and t.tolist() == [[1.0, 2.0], [1.0, 2.0]]  # broadcast and converted
    assert t.neg_() is t and t.tolist() == [[-1.0, -2.0]] * 2
    assert t.relu_().tolist() == [[0.0, 0.0]] * 2
    u = ember.tensor([0.0, 1.0])
    u.exp_()
    assert_close(u, [1.0, math.e])
    u.sqrt_().sigmoid_().tanh_()
    assert_close(u, np.tanh(_sigmoid(np.sqrt([1.0, math.e]))))
    v = ember.tensor([-2.0, 0.5, 3.0])
    assert v.clamp_(-1, 1).tolist() == [-1.0, 0.5, 1.0]
    assert v.masked_fill_(v > 0, 7.0).tolist() == [-1.0, 7.0, 7.0]


# ---- reductions


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=repr)
def test_reductions(rng, dtype):
    t, x = _input(rng, (3, 4, 5), -2, 2, dtype)
    # Sums accumulate in float32 for 16-bit inputs, then round once: the tolerance of the result's
    # dtype, scaled by how far the sum's magnitude exceeds its terms'.
    tol = dict(rtol=RTOL[dtype] * 4, atol=ATOL[dtype] * 8)
    assert_close(t.sum(), x.sum(), **tol)
    assert_close(t.sum(1), x.sum(1), **tol)
    assert_close(t.sum(dim=(0, 2), keepdim=True), x.sum((0, 2), keepdims=True), **tol)
    assert_close(ember.sum(t, -1), x.sum(-1), **tol)
    assert_close(t.mean(), x.mean(), **tol)
    assert_close(t.mean(dim=[0, 1]), x.mean((0, 1)), **tol)
    assert_close(t.amax(1), x.max(1))
    assert_close(t.amin((0, 1)), x.min((0, 1)))
    assert_close(t.max(), x.max())
    assert_close(t.min(), x.min())
    values, indices = t.max(dim=2)
    assert_close(values, x.max(2))
    np.testing.assert_array_equal(np.asarray(indices), x.argmax(2))
    r = t.min(0, keepdim=True)
    assert r.values.shape == (1, 4, 5) and r.indices.dtype is ember.int64
    np.testing.assert_array_equal(np.asarray(r.indices), x.argmin(0)[None])
    assert t.argmax().item() == x.argmax() and t.argmin().item() == x.argmin()
    np.testing.assert_array_equal(np.asarray(t.argmax(dim=1)), x.argmax(1))
    assert t.argmax(1, keepdim=True).shape == (3, 1, 5)
    var_tol = dict(rtol=RTOL[dtype] * 8, atol=ATOL[dtype] * 8)
    assert_close(t.var(), x.var(ddof=1), **var_tol)
    assert_close(t.var(1, unbiased=False), x.var(1), **var_tol)
    assert_close(t.var(dim=2, correction=0), x.var(2), **var_tol)
    assert_close(ember.std(t, 0), x.std(0, ddof=1), **var_tol)
    assert_close(t.logsumexp(1), np.log(np.exp(x).sum(1)), **tol)
    assert_close(t.norm(), np.sqrt((x**2).sum()), **tol)
    assert_close(t.norm(p=1, dim=2), np.abs(x).sum(2), **tol)
    assert_close(t.norm(p=math.inf), np.abs(x).max(), **tol)
    assert_close(t.abs().add(0.5).prod(dim=2), (np.abs(x) + 0.5).prod(2), rtol=RTOL[dtype] * 8, atol=ATOL[dtype] * 8)


def test_reductions_of_integers_and_bools(rng):
    x = rng.integers(-5, 5, (4, 6))
    t = ember.tensor(x)
    assert t.sum().item() == x.sum() and t.sum(0).tolist() == x.sum(0).tolist()
    assert t.sum(dtype=ember.float64).dtype is ember.float64
    assert t.prod(1).tolist() == x.prod(1).tolist()
    assert t.max(1).values.tolist() == x.max(1).tolist()
    assert (t > 0).any().item() and not (t > 10).any().item()
    assert (t > -6).all().item() and (t > 0).all(1).tolist() == (x > 0).all(1).tolist()
    assert ember.any(t == 3, dim=0).tolist() == (x == 3).any(0).tolist()
    with pytest.raises(ember.DTypeError):
        t.mean()
    assert t.mean(dtype=ember.float64).item() == pytest.approx(x.mean())


def test_softmax_and_log_softmax(rng):
    t, x = _input(rng, (3, 5), -3, 3, ember.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    assert_close(t.softmax(1), e / e.sum(1, keepdims=True))
    assert_close(ember.log_softmax(t, dim=-1), np.log(e / e.sum(1, keepdims=True)))
    assert ember.softmax(t.half(), 0, dtype=ember.float32).dtype is ember.float32


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=repr)
def test_cumsum_and_cumprod(rng, dtype):
    t, x = _input(rng, (3, 40, 5), -2, 2, dtype)
    # 16-bit inputs accumulate in float32 and round each output once: the result's tolerance,
    # scaled by how far a running sum's magnitude exceeds its terms'.
    tol = dict(rtol=RTOL[dtype] * 4, atol=ATOL[dtype] * 16)
    for dim in (0, 1, 2, -1):
        assert_close(t.cumsum(dim), np.cumsum(x, dim), **tol)
    assert_close(ember.cumsum(t.transpose(0, 2), dim=1), np.cumsum(x.transpose(2, 1, 0), 1), **tol)
    f, y = _input(rng, (4, 30), 0.8, 1.25, dtype)
    assert_close(f.cumprod(1), np.cumprod(y, 1), **tol)
    assert_close(ember.cumprod(f, dim=0), np.cumprod(y, 0), **tol)
    assert t.cumsum(1).dtype is dtype and t.cumsum(0, dtype=ember.float64).dtype is ember.float64


def test_cumsum_and_cumprod_of_integers_gradients_and_errors(rng):
    x = rng.integers(-3, 4, (4, 6))
    t = ember.tensor(x)
    assert t.cumsum(1).tolist() == np.cumsum(x, 1).tolist() and t.cumsum(1).dtype is ember.int64
    assert t.int().cumsum(0).dtype is ember.int64  # PyTorch's rule: integers sum as int64
    assert (t > 0).cumsum(1).tolist() == np.cumsum(x > 0, 1).tolist()
    assert t.cumprod(0).tolist() == np.cumprod(x, 0).tolist()
    assert t.cumsum(1, dtype=ember.int32).dtype is ember.int32
    assert ember.tensor(2.5).cumsum(0).item() == 2.5 and ember.tensor(2.5).cumsum(-1).shape == ()
    assert ember.ones(0, 3).cumsum(0).shape == (0, 3)
    a = ember.tensor(rng.normal(size=(3, 7)), dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda v: v.cumsum(1), (a,))
    assert ember.autograd.gradcheck(lambda v: v.cumprod(0), (a,))
    zeros = ember.tensor([1.5, 0.0, -0.7, 0.0, 0.0, 2.0], dtype=ember.float64, requires_grad=True)
    zeros.cumprod(0).sum().backward()
    # d/dx_j of sum_i prod_{k<=i} x_k, written out: only the terms that skip the zero survive.
    v = [1.5, 0.0, -0.7, 0.0, 0.0, 2.0]
    expected = [sum(math.prod(v[k] for k in range(i + 1) if k != j) for i in range(j, 6)) for j in range(6)]
    assert_close(zeros.grad, np.array(expected), rtol=1e-15, atol=1e-15)
    with pytest.raises(IndexError, match="cumsum"):
        t.cumsum(2)
    with pytest.raises(ember.DTypeError, match="dtype bool"):
        t.cumsum(0, dtype=ember.bool)


def test_cumsum_and_cumprod_against_pytorch(rng):
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(3, 50, 4))
    for dim in (0, 1, 2):
        a, ta = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        (ember.cumsum(a, dim) * ember.cumprod(a, dim)).sum().backward()
        (torch.cumsum(ta, dim) * torch.cumprod(ta, dim)).sum().backward()
        assert_close(ember.cumprod(a, dim), torch.cumprod(ta, dim).detach().numpy(), rtol=1e-12, atol=1e-12)
        assert_close(a.grad, ta.grad.numpy(), rtol=1e-10, atol=1e-10)


# ---- matmul


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=repr)
@pytest.mark.parametrize(
    "sa,sb", [((3, 4), (4, 5)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2))]
)
def test_matmul(rng, dtype, sa, sb):
    a, x = _input(rng, sa, -1, 1, dtype)
    b, y = _input(rng, sb, -1, 1, dtype)
    expected = x @ y
    # A dot product of k terms: rounding of the result plus float32 accumulation of k products.
    k = sa[-1]
    tol = dict(rtol=RTOL[dtype] * 4, atol=ATOL[dtype] * k)
    assert_close(a @ b, expected, **tol)
    assert_close(ember.matmul(a, b), expected, **tol)
    assert (a @ b).shape == expected.shape


def test_mm_bmm_linear(rng):
    a, x = _input(rng, (3, 4), -1, 1, ember.float64)
    b, y = _input(rng, (4, 2), -1, 1, ember.float64)
    assert_close(a.mm(b), x @ y)
    ba, bx = _input(rng, (2, 3, 4), -1, 1, ember.float64)
    bb, by = _input(rng, (2, 4, 5), -1, 1, ember.float64)
    assert_close(ember.bmm(ba, bb), bx @ by)
    w, wv = _input(rng, (6, 4), -1, 1, ember.float64)
    bias, bv = _input(rng, (6,), -1, 1, ember.float64)
    assert_close(ember.linear(a, w, bias), x @ wv.T + bv)
    assert_close(ember.linear(a, w), x @ wv.T)
    with pytest.raises(ember.ShapeError):
        a @ a


# ---- shape ops and views


def test_views_share_memory_and_match_numpy():
    t = ember.arange(24.0).reshape(2, 3, 4)
    x = np.arange(24.0).reshape(2, 3, 4)
    cases = [
        (t.view(6, 4), x.reshape(6, 4)),
        (t.view((4, -1)), x.reshape(4, -1)),
        (t.reshape(-1), x.reshape(-1)),
        (t.permute(2, 0, 1), x.transpose(2, 0, 1)),
        (t.permute((1, 0, 2)), x.transpose(1, 0, 2)),
        (t.transpose(0, 2), x.swapaxes(0, 2)),
        (t.swapaxes(1, 2), x.swapaxes(1, 2)),
        (t.unsqueeze(1), x[:, None]),
        (t.unsqueeze(-1), x[..., None]),
        (t[:, :1].squeeze(), x[:, :1].squeeze()),
        (t[:, :1].squeeze(1), x[:, :1].squeeze(1)),
        (t.unsqueeze(0).unsqueeze(2).squeeze((0, 2)), x),
        (t.flatten(), x.reshape(-1)),
        (t.flatten(1), x.reshape(2, 12)),
        (t.flatten(0, 1), x.reshape(6, 4)),
        (t[:1].expand(3, 3, 4), np.broadcast_to(x[:1], (3, 3, 4))),
        (t[:, :1].expand(-1, 5, -1), np.broadcast_to(x[:, :1], (2, 5, 4))),
        (t.narrow(2, 1, 2), x[:, :, 1:3]),
        (t.select(1, -1), x[:, -1]),
        (t.T, x.T),
        (t[0].t(), x[0].T),
        (t.mT, x.swapaxes(-1, -2)),
        (t.broadcast_to((3, 2, 3, 4)), np.broadcast_to(x, (3, 2, 3, 4))),
    ]
    for got, expected in cases:
        np.testing.assert_array_equal(np.asarray(got), expected)
        assert got.data_ptr() >= t.data_ptr()  # a view into t's memory
    v = t.view(24)
    v[0] = 100.0
    assert t[0, 0, 0].item() == 100.0
    with pytest.raises(ember.ShapeError):
        t.transpose(0, 1).view(24)
    assert t.transpose(0, 1).reshape(24).is_contiguous()


def test_view_as_expand_as_repeat_sum_to_size():
    t = ember.arange(6.0).reshape(2, 3)
    assert t.view_as(ember.zeros(3, 2)).shape == (3, 2)
    assert t.reshape_as(ember.zeros(6)).shape == (6,)
    assert t[:1].expand_as(t).tolist() == [[0.0, 1.0, 2.0]] * 2
    np.testing.assert_array_equal(np.asarray(t.repeat(2, 3)), np.tile(np.arange(6.0).reshape(2, 3), (2, 3)))
    np.testing.assert_array_equal(np.asarray(t.repeat(2, 1, 1)), np.tile(np.arange(6.0).reshape(2, 3), (2, 1, 1)))
    assert t.sum_to_size(1, 3).tolist() == [[3.0, 5.0, 7.0]]
    with pytest.raises(ember.ShapeError):
        t.repeat(2)


def test_split_chunk_unbind_cat_stack():
    t = ember.arange(10.0)
    assert [p.tolist() for p in t.split(4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [p.numel() for p in ember.split(t, [2, 8])] == [2, 8]
    assert [p.numel() for p in t.chunk(3)] == [4, 4, 2]
    m = t.reshape(2, 5)
    assert [r.tolist() for r in m.unbind(1)][0] == [0.0, 5.0]
    assert ember.cat([m, m], dim=1).shape == (2, 10)
    assert ember.cat((m, m)).shape == (4, 5) and ember.concat([m, m], 0).shape == (4, 5)
    assert ember.stack([m, m], dim=1).shape == (2, 2, 5)
    with pytest.raises(ember.ShapeError):
        ember.cat([m, t], 0)


def test_gather_index_select_scatter_add_index_add():
    x = ember.arange(12.0).reshape(3, 4)
    xv = np.arange(12.0).reshape(3, 4)
    idx = ember.tensor([2, 0])
    np.testing.assert_array_equal(np.asarray(x.index_select(0, idx)), xv[[2, 0]])
    np.testing.assert_array_equal(np.asarray(ember.index_select(x, 1, idx)), xv[:, [2, 0]])
    g = ember.tensor([[0, 3], [1, 1], [2, 0]])
    np.testing.assert_array_equal(np.asarray(x.gather(1, g)), np.take_along_axis(xv, np.asarray(g), 1))
    s = ember.zeros(3, 4).scatter_add(1, g, ember.ones(3, 2))
    assert s.tolist() == [[1, 0, 0, 1], [0, 2, 0, 0], [1, 0, 1, 0]]
    a = ember.zeros(3, 2).index_add(0, ember.tensor([0, 0, 2]), ember.ones(3, 2), alpha=2)
    assert a.tolist() == [[4, 4], [0, 0], [2, 2]]

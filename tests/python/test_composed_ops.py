"""The ops ember composes of its own for PyTorch users: flip, roll, tril, triu and meshgrid against
NumPy and through autograd (gradcheck); normal_, uniform_ and bernoulli against their distributions;
and their errors."""

import numpy as np
import pytest

import ember


def _pair(shape, seed=0):
    a = np.random.default_rng(seed).uniform(-1, 1, shape)
    return ember.tensor(a, dtype=ember.float64), a


@pytest.mark.parametrize("dims", [0, 1, -1, (0, 2), (2, 0, 1), ()])
def test_flip_against_numpy(dims):
    t, a = _pair((2, 3, 4))
    np.testing.assert_array_equal(t.flip(dims).numpy(), np.flip(a, dims))
    np.testing.assert_array_equal(ember.flip(t, dims).numpy(), np.flip(a, dims))


@pytest.mark.parametrize(
    "shifts,dims", [(1, 1), (-1, 0), (5, 2), (-7, None), (13, None), ((1, -2), (0, 2)), (0, 1), (4, -1)]
)
def test_roll_against_numpy(shifts, dims):
    t, a = _pair((2, 3, 4))
    np.testing.assert_array_equal(t.roll(shifts, dims).numpy(), np.roll(a, shifts, dims))


@pytest.mark.parametrize("diagonal", [-4, -1, 0, 1, 2, 6])
@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (2, 3, 5), (0, 3)])
def test_tril_triu_against_numpy(shape, diagonal):
    t, a = _pair(shape)
    np.testing.assert_array_equal(t.tril(diagonal).numpy(), np.tril(a, diagonal))
    np.testing.assert_array_equal(ember.triu(t, diagonal=diagonal).numpy(), np.triu(a, diagonal))


def test_tril_keeps_dtype_and_makes_a_causal_mask():
    mask = ember.ones(3, 3, dtype=ember.bool).tril()
    assert mask.dtype is ember.bool
    assert mask.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert ember.arange(9).reshape(3, 3).triu().dtype is ember.int64


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_against_numpy(indexing):
    xs = [np.arange(3.0), np.arange(4.0) * 10, np.arange(2.0) * 100]
    for n in (1, 2, 3):
        got = ember.meshgrid(*[ember.tensor(x, dtype=ember.float64) for x in xs[:n]], indexing=indexing)
        want = np.meshgrid(*xs[:n], indexing=indexing)
        assert len(got) == n
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)
    listed = ember.meshgrid([ember.arange(3), ember.arange(2)])
    assert [tuple(g.shape) for g in listed] == [(3, 2), (3, 2)]
    scalar = ember.meshgrid(ember.tensor(5), ember.arange(2))
    assert [tuple(g.shape) for g in scalar] == [(1, 2), (1, 2)]


def test_gradients_flow_through_the_compositions():
    def check(fn, shape):
        x = ember.tensor(np.random.default_rng(3).uniform(-1, 1, shape), dtype=ember.float64, requires_grad=True)
        assert ember.autograd.gradcheck(fn, [x])

    check(lambda x: x.flip((0, 1)) * ember.arange(12.0, dtype=ember.float64).reshape(3, 4), (3, 4))
    check(lambda x: x.roll((1, 2), (0, 1)) * ember.arange(12.0, dtype=ember.float64).reshape(3, 4), (3, 4))
    check(lambda x: x.tril(-1) + x.triu(1) * 2, (3, 4))
    check(lambda x: ember.meshgrid(x, x)[0] * ember.meshgrid(x, x)[1], (3,))


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda t: t.flip(3), IndexError, ["flip"]),
        (lambda t: t.flip((0, -2)), ValueError, ["dim -2", "more than once"]),
        (lambda t: t.roll((1, 2), 0), ValueError, ["same length"]),
        (lambda t: t.roll((1, 2)), ValueError, ["without dims"]),
        (lambda t: t.roll(1, 5), IndexError, ["roll"]),
        (lambda t: ember.arange(3).tril(), ValueError, ["tril", "at least 2 dims", "(3,)"]),
        (lambda t: ember.meshgrid(t), ValueError, ["meshgrid", "(2, 3)", "0-D or 1-D"]),
        (lambda t: ember.meshgrid(ember.arange(2), indexing="yx"), ValueError, ["'ij' or 'xy'", "'yx'"]),
        (lambda t: ember.meshgrid(), ValueError, ["at least one"]),
        (lambda t: ember.meshgrid(ember.arange(2), 3), TypeError, ["meshgrid"]),
    ],
)
def test_errors(call, error, words):
    with pytest.raises(error) as info:
        call(ember.zeros(2, 3))
    for word in words:
        assert word in str(info.value)


def test_random_fills_and_bernoulli_draw_from_their_distributions():
    # 20000 draws: the sample mean's standard error is std / 141, so 0.1 is over 4 of them for std 3.
    g = ember.Generator(7)
    x = ember.empty(20000).normal_(2.0, 3.0, generator=g)
    assert abs(x.mean().item() - 2.0) < 0.1 and abs(x.std().item() - 3.0) < 0.1
    u = ember.zeros(20000).uniform_(-1.0, 3.0, generator=g)
    assert -1.0 <= u.min().item() and u.max().item() < 3.0 and abs(u.mean().item() - 1.0) < 0.05
    b = ember.bernoulli(ember.full((20000,), 0.3), generator=g)
    assert b.dtype is ember.float32 and set(b.tolist()) <= {0.0, 1.0}
    assert abs(b.mean().item() - 0.3) < 0.02
    edges = ember.tensor([0.0, 1.0, 0.0, 1.0]).bernoulli()
    assert edges.tolist() == [0.0, 1.0, 0.0, 1.0]
    again = ember.empty(5).normal_(generator=ember.Generator(3)).tolist()
    assert again == ember.empty(5).normal_(generator=ember.Generator(3)).tolist()


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda: ember.bernoulli(ember.tensor([0.5, 1.5])), ValueError, ["[0, 1]", "0.5 to 1.5"]),
        (lambda: ember.bernoulli(ember.tensor([float("nan")])), ValueError, ["NaN"]),
        (lambda: ember.bernoulli(ember.zeros(2), 2.0), ValueError, ["2.0"]),
        (lambda: ember.bernoulli(ember.arange(3)), TypeError, ["floating", "int64"]),
    ],
)
def test_bernoulli_errors(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value)

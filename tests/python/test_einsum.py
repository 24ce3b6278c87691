"""ember.einsum against numpy.einsum (float64, the same inputs) in its three calling forms, its
gradients against gradcheck, and its errors as Python exceptions."""

import numpy as np
import pytest

import ember

# equation, operand shapes; NumPy refuses an ellipsis missing from the output, which PyTorch and
# ember sum away: those cases name the same sum with letters for NumPy after a "|".
CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->i", [(3, 4), (3, 4)]),
    ("ij,j", [(3, 4), (4,)]),
    ("ba", [(3, 4)]),
    ("Ba,aC", [(3, 4), (4, 2)]),
    ("ijk,jl,kl->il", [(2, 3, 4), (3, 5), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)]),
    ("...ij->...ji", [(2, 3, 4)]),
    ("i...->...", [(2, 3, 4)]),
    ("...ij->ij|aij->ij", [(2, 3, 4)]),
    ("i j -> j i", [(3, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij,jk->ik", [(3, 1), (4, 5)]),
    ("ij,jk,ik->ik", [(1, 3), (3, 2), (4, 2)]),
    ("ij,jk->ik", [(3, 0), (0, 5)]),
    (",ij->ij", [(), (2, 3)]),
]


@pytest.mark.parametrize("equations,shapes", CASES, ids=[c[0] or "scalar" for c in CASES])
def test_einsum_against_numpy(equations, shapes):
    equation, _, numpy_equation = equations.partition("|")
    rng = np.random.default_rng(len(equation))
    arrays = [rng.uniform(-1, 1, s) for s in shapes]
    got = ember.einsum(equation, *[ember.tensor(a, dtype=ember.float64) for a in arrays])
    want = np.einsum(numpy_equation or equation, *arrays)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_einsum_list_and_sublist_forms_agree_with_the_equation():
    rng = np.random.default_rng(0)
    a, b = (ember.tensor(rng.uniform(-1, 1, s), dtype=ember.float64) for s in [(2, 3, 4), (4, 5)])
    want = ember.einsum("bij,jk->bik", a, b).numpy()
    np.testing.assert_array_equal(ember.einsum("bij,jk->bik", [a, b]).numpy(), want)
    np.testing.assert_array_equal(ember.einsum(a, [1, 8, 9], b, [9, 10], [1, 8, 10]).numpy(), want)
    # Without an output sublist: the subscripts used once, sorted (0-25 before 26-51, as 'A' before 'a').
    want = np.einsum("...e,eC", a.numpy(), b.numpy())
    np.testing.assert_allclose(ember.einsum(a, [Ellipsis, 30], b, [30, 2]).numpy(), want, rtol=1e-12, atol=1e-12)


def test_einsum_gradients():
    rng = np.random.default_rng(1)
    for equation, shapes in [("ij,jk->ik", [(3, 4), (4, 2)]), ("iij->ji", [(3, 3, 2)]), ("ij,ij->i", [(1, 4), (3, 4)])]:
        inputs = [ember.tensor(rng.uniform(-1, 1, s), dtype=ember.float64, requires_grad=True) for s in shapes]
        assert ember.autograd.gradcheck(lambda *xs, eq=equation: ember.einsum(eq, *xs), inputs)


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda m: ember.einsum("ij,jk->ik", m), ValueError, ["'ij,jk->ik'", "2 operand"]),
        (lambda m: ember.einsum("i$j", m), ValueError, ["'$'"]),
        (lambda m: ember.einsum("ij->ii", m), ValueError, ["repeats 'i'"]),
        (lambda m: ember.einsum("ijk", m), ValueError, ["(2, 3)", "'ijk'"]),
        (lambda m: ember.einsum("ij,jk", m, ember.zeros(4, 2)), ValueError, ["'j'", "size 4"]),
        (lambda m: ember.einsum("ij", 3), TypeError, ["operands must be tensors", "int"]),
        (lambda m: ember.einsum(), TypeError, ["no arguments"]),
        (lambda m: ember.einsum(m, [0, "x"]), TypeError, ["int or Ellipsis", "str"]),
        (lambda m: ember.einsum(m, [0, 52]), ValueError, ["52", "[0, 52)"]),
        (lambda m: ember.einsum(m, 5), TypeError, ["sublist of operand 0"]),
    ],
)
def test_einsum_errors(call, error, words):
    with pytest.raises(error) as info:
        call(ember.zeros(2, 3))
    for word in words:
        assert word in str(info.value)

"""sort, argsort and topk against NumPy's stable sorts (every dtype NumPy shares with ember, ties,
NaN), their namedtuple results, gradients, and errors."""

import numpy as np
import pytest

import ember

DTYPES = [("float32", ember.float32), ("float64", ember.float64), ("float16", ember.float16),
          ("int32", ember.int32), ("int64", ember.int64), ("uint8", ember.uint8), ("bool", ember.bool)]


def _data(np_dtype, shape, seed):
    values = np.random.default_rng(seed).integers(-3, 4, shape)  # few levels: rows hold ties
    if np_dtype == "uint8":
        values = np.abs(values)
    return values.astype(np_dtype)


@pytest.mark.parametrize("np_dtype,dtype", DTYPES, ids=[d[0] for d in DTYPES])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_and_argsort_match_numpy_stable(np_dtype, dtype, dim):
    a = _data(np_dtype, (5, 7), 3)
    t = ember.tensor(a, dtype=dtype)
    values, indices = ember.sort(t, dim=dim)
    order = np.argsort(a, axis=dim, kind="stable")
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, order, axis=dim))
    np.testing.assert_array_equal(t.argsort(dim=dim).numpy(), order)
    # Descending and stable: equal elements keep their order, as NumPy's stable sort of the negation.
    down = np.argsort(-a.astype(np.float64), axis=dim, kind="stable")
    np.testing.assert_array_equal(t.sort(dim, descending=True).indices.numpy(), down)


def test_nan_sorts_last_and_counts_as_largest():
    a = np.array([3.0, np.nan, -0.0, 0.0, -np.inf, np.inf, 1.0], np.float32)
    t = ember.tensor(a)
    np.testing.assert_array_equal(t.argsort().numpy(), np.argsort(a, kind="stable"))
    assert t.sort(descending=True).indices.tolist() == [1, 5, 0, 6, 2, 3, 4]
    assert t.topk(2).indices.tolist() == [1, 5]


@pytest.mark.parametrize("largest", [True, False])
def test_topk_is_the_head_of_the_sort(largest):
    a = np.random.default_rng(1).standard_normal((4, 10)).astype(np.float32)
    t = ember.tensor(a)
    for k in range(11):
        result = t.topk(k, dim=1, largest=largest)
        assert result.values.shape == (4, k) and result.indices.dtype is ember.int64
        head = t.sort(1, descending=largest)
        np.testing.assert_array_equal(result.indices.numpy(), head.indices.numpy()[:, :k])
        np.testing.assert_array_equal(result.values.numpy(), head.values.numpy()[:, :k])
    values, indices = ember.topk(t, 3, 0)  # unpacks as a pair, as PyTorch's return types
    assert values.shape == (3, 10)


def test_top5_accuracy_idiom():
    logits = ember.tensor([[0.1, 0.9, 0.3, 0.2, 0.5, 0.0, 0.7], [0.8, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]])
    target = ember.tensor([5, 3])
    _, pred = logits.topk(5, 1, True, True)
    correct = pred.eq(target.view(-1, 1).expand_as(pred))
    assert correct.sum().item() == 1  # sample 0's class 5 scores lowest; sample 1's class 3 is fifth


def test_gradients_flow_to_the_chosen_elements():
    x = ember.tensor([[1.0, 5.0, 3.0, 4.0]], dtype=ember.float64, requires_grad=True)
    x.topk(2).values.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0, 1.0]]
    y = ember.tensor(np.random.default_rng(2).standard_normal((3, 4)), dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda v: v.sort(0, descending=True).values, [y])


def test_against_torch_where_installed():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(4).integers(0, 5, (6, 9)).astype(np.float32)
    want = torch.from_numpy(a).sort(dim=1, stable=True)
    got = ember.tensor(a).sort(dim=1, stable=True)
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    want_top = torch.from_numpy(a * 0 + np.arange(9, dtype=np.float32)).topk(4, 1)
    got_top = ember.tensor(a * 0 + np.arange(9, dtype=np.float32)).topk(4, 1)
    np.testing.assert_array_equal(got_top.indices.numpy(), want_top.indices.numpy())


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda t: t.topk(4), IndexError, ["topk", "k = 4", "size 3"]),
        (lambda t: t.topk(-1), IndexError, ["k = -1"]),
        (lambda t: t.sort(dim=2), IndexError, ["sort"]),
        (lambda t: t.argsort(dim=-3), IndexError, ["sort"]),
    ],
)
def test_errors(call, error, words):
    with pytest.raises(error) as info:
        call(ember.zeros(2, 3))
    for word in words:
        assert word in str(info.value)

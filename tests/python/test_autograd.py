"""Autograd from Python: backward on composite expressions against analytic gradients, autograd.grad
with create_graph (double backward), hooks, grad mode, custom Functions on ember's engine, gradcheck."""

import math
import threading

import numpy as np
import pytest

import ember
from ember.autograd import Function
from conftest import assert_close, to_numpy


def leaf(values, dtype=ember.float64):
    return ember.tensor(values, dtype=dtype, requires_grad=True)


# ---- backward


def test_requires_grad_and_leaves():
    x = ember.ones(2)
    assert not x.requires_grad and x.is_leaf and x.grad_fn is None
    x.requires_grad = True
    assert x.requires_grad
    y = x * 2
    assert y.requires_grad and not y.is_leaf and y.grad_fn.name() == "mul"
    assert y.grad_fn is y.grad_fn or y.grad_fn.name() == y.grad_fn.name()
    assert "mul" in repr(y.grad_fn)
    (fn, nr), = [e for e in y.grad_fn.next_functions if e[0] is not None]
    assert fn.name() == "accumulate_grad" and nr == 0
    with pytest.raises(ember.AutogradError):
        y.requires_grad = False  # only leaves
    with pytest.raises(ember.DTypeError):
        ember.ones(2, dtype=ember.int64).requires_grad_()


def test_backward_of_a_composite_expression_matches_analytic_gradients(rng):
    xv, wv, bv = rng.standard_normal((4, 3)), rng.standard_normal((3, 2)), rng.standard_normal(2)
    x, w, b = leaf(xv), leaf(wv), leaf(bv)
    # loss = sum(tanh(x @ w + b)^2) / 2 + sum(exp(x) * sigmoid(x))
    z = x @ w + b
    loss = (z.tanh() ** 2).sum() / 2 + (x.exp() * x.sigmoid()).sum()
    loss.backward()
    zv = xv @ wv + bv
    dz = np.tanh(zv) * (1 - np.tanh(zv) ** 2)
    s = 1 / (1 + np.exp(-xv))
    dx = dz @ wv.T + np.exp(xv) * s + np.exp(xv) * s * (1 - s)
    assert_close(x.grad, dx, rtol=1e-10, atol=1e-10)
    assert_close(w.grad, xv.T @ dz, rtol=1e-10, atol=1e-10)
    assert_close(b.grad, dz.sum(0), rtol=1e-10, atol=1e-10)


def test_gradients_accumulate_and_can_be_reset():
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]
    x.grad = None
    assert x.grad is None
    x.grad = ember.zeros(2, dtype=ember.float64)
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    with pytest.raises(ember.ShapeError):
        x.grad = ember.zeros(3, dtype=ember.float64)


def test_backward_with_gradient_and_retain_graph():
    x = leaf([1.0, 2.0, 3.0])
    y = x * x
    y.backward(ember.tensor([1.0, 0.0, 2.0], dtype=ember.float64), retain_graph=True)
    assert x.grad.tolist() == [2.0, 0.0, 12.0]
    y.sum().backward()
    assert x.grad.tolist() == [4.0, 4.0, 18.0]
    z = (x * x).sum()
    z.backward()
    with pytest.raises(ember.AutogradError):
        z.backward()  # the graph was freed
    with pytest.raises(ember.Error):
        (x * 2).backward()  # a non-scalar needs a gradient


def test_backward_inputs_accumulates_only_into_them():
    a, b = leaf([1.0]), leaf([2.0])
    (a * b).sum().backward(inputs=[a])
    assert a.grad.tolist() == [2.0] and b.grad is None


def test_retain_grad_on_non_leaves():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.retain_grad()
    assert y.retains_grad
    (y * y).sum().backward()
    assert y.grad.tolist() == [6.0, 12.0]


def test_autograd_grad_with_create_graph_and_double_backward():
    x = leaf([0.5, -1.0, 2.0])
    y = (x**3).sum()
    (g,) = ember.autograd.grad(y, x, create_graph=True)
    assert_close(g, 3 * np.array([0.5, -1.0, 2.0]) ** 2)
    assert g.requires_grad
    (h,) = ember.autograd.grad(g.sum(), x)
    assert_close(h, 6 * np.array([0.5, -1.0, 2.0]))
    assert x.grad is None  # grad() leaves .grad alone
    # and through backward: d/dx sum(dy/dx) with a tanh
    z = leaf([0.3, 0.7])
    (dz,) = ember.autograd.grad(z.tanh().sum(), [z], create_graph=True)
    dz.sum().backward()
    t = np.tanh([0.3, 0.7])
    assert_close(z.grad, -2 * t * (1 - t**2))


def test_autograd_grad_options():
    a, b, unused = leaf([1.0]), leaf([2.0]), leaf([3.0])
    out = a * b
    ga, gb = ember.autograd.grad([out], [a, b], grad_outputs=[ember.tensor([10.0], dtype=ember.float64)],
                                 retain_graph=True)
    assert ga.tolist() == [20.0] and gb.tolist() == [10.0]
    with pytest.raises(ember.AutogradError):
        ember.autograd.grad(out, [a, unused], retain_graph=True)
    ga, gu = ember.autograd.grad(out, (a, unused), allow_unused=True)
    assert ga.tolist() == [2.0] and gu is None


def test_hooks_see_and_replace_gradients():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    y = x * 2
    y.register_hook(lambda g: g * 10)  # replaces y's gradient
    y.sum().backward()
    assert seen == [[20.0, 20.0]] and x.grad.tolist() == [20.0, 20.0]
    h = x.register_hook(lambda g: g * 0)
    h.remove()
    x.grad = None
    (x * 1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    with pytest.raises(ember.AutogradError):
        ember.ones(1).register_hook(lambda g: g)


def test_post_accumulate_grad_hook():
    p = leaf([1.0, 2.0])
    calls = []
    p.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.tolist()))
    (p * p).sum().backward()
    assert calls == [[2.0, 4.0]]


def test_hook_errors_propagate_as_the_python_exception():
    x = leaf([1.0])

    def bad(g):
        raise KeyError("from the hook")

    x.register_hook(bad)
    with pytest.raises(KeyError, match="from the hook"):
        (x * 2).sum().backward()
    y = leaf([1.0])
    y.register_hook(lambda g: "not a tensor")
    with pytest.raises(TypeError, match="hook"):
        (y * 2).sum().backward()


def test_no_grad_enable_grad_set_grad_enabled():
    x = leaf([1.0])
    with ember.no_grad():
        assert not ember.is_grad_enabled()
        y = x * 2
        with ember.enable_grad():
            z = x * 2
    assert not y.requires_grad and z.requires_grad and ember.is_grad_enabled()

    @ember.no_grad()
    def evaluate(t):
        return t * 3

    assert not evaluate(x).requires_grad and ember.is_grad_enabled()
    with ember.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ember.is_grad_enabled()
    ember.set_grad_enabled(False)
    assert not ember.is_grad_enabled()
    ember.set_grad_enabled(True)
    with ember.no_grad():
        x.mul_(2)  # in-place update of a leaf, as an optimizer does
    assert x.tolist() == [2.0]


def test_inference_mode_as_pytorch():
    x = leaf([1.0])
    with ember.inference_mode():
        assert ember.is_inference_mode_enabled() and not ember.is_grad_enabled()
        assert not (x * 2).requires_grad
        with ember.inference_mode(False):  # recording on again, as PyTorch's
            assert ember.is_grad_enabled() and not ember.is_inference_mode_enabled()
            assert (x * 2).requires_grad
        assert ember.is_inference_mode_enabled() and not ember.is_grad_enabled()
    assert ember.is_grad_enabled() and not ember.is_inference_mode_enabled()

    @ember.inference_mode
    def bare(t):
        return t * 3, ember.is_inference_mode_enabled()

    @ember.inference_mode()
    def called(t):
        return t * 3

    y, inside = bare(x)
    assert inside and not y.requires_grad and not called(x).requires_grad
    assert ember.is_grad_enabled() and not ember.is_inference_mode_enabled()
    seen = {}
    with ember.inference_mode():  # per thread: a new thread starts outside
        t = threading.Thread(target=lambda: seen.update(inference=ember.is_inference_mode_enabled(), bare=bare(x)[1]))
        t.start()
        t.join()
    assert seen == {"inference": False, "bare": True}


def test_grad_mode_decorators_cover_a_generators_body():
    # Entered once at the call, the mode would be over before the body's first step ran.
    x = leaf([1.0])

    @ember.no_grad()
    def steps():
        for _ in range(2):
            received = yield (x * 2).requires_grad, ember.is_grad_enabled()
            assert received in (None, "sent")
        return "finished"

    gen = steps()
    assert next(gen) == (False, False) and ember.is_grad_enabled()  # the caller's mode between steps
    assert gen.send("sent") == (False, False)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    assert stop.value.value == "finished"
    thrown = steps()
    next(thrown)
    with pytest.raises(KeyError, match="into the body"):
        thrown.throw(KeyError("into the body"))

    @ember.inference_mode
    def inference_steps():
        yield ember.is_inference_mode_enabled()

    assert list(inference_steps()) == [True] and not ember.is_inference_mode_enabled()


def test_grad_mode_is_per_thread():
    result = {}

    def worker():
        result["enabled"] = ember.is_grad_enabled()

    with ember.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert result["enabled"] is True


def test_in_place_on_a_saved_tensor_is_detected():
    x = leaf([1.0, 2.0])
    y = x * 1
    z = (y * y).sum()
    y.add_(1)
    with pytest.raises(ember.AutogradError):
        z.backward()


def test_anomaly_detection():
    x = leaf([-1.0])
    with ember.autograd.detect_anomaly():
        with pytest.raises(ember.AutogradError):
            x.sqrt()


# ---- custom functions


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x  # ember ops: differentiable again under create_graph


class ScaledAdd(Function):
    """a * scale + b, with a non-tensor argument and a backward that returns None for b when not needed."""

    @staticmethod
    def forward(ctx, a, scale, b):
        ctx.scale = scale
        ctx.needs = ctx.needs_input_grad
        return a * scale + b

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None, grad if ctx.needs_input_grad[2] else None


class SplitSigns(Function):
    """Two outputs: the positive and negative parts (and an integer mask, not differentiable)."""

    @staticmethod
    def forward(ctx, x):
        mask = x > 0
        pos = x.relu()
        neg = x - pos
        ctx.save_for_backward(mask)
        ctx.mark_non_differentiable(mask)
        return pos, neg, mask

    @staticmethod
    def backward(ctx, g_pos, g_neg, g_mask):
        (mask,) = ctx.saved_tensors
        m = mask.to(g_pos.dtype)
        return g_pos * m + g_neg * (1 - m)


def test_custom_function_forward_backward_and_ctx():
    x = leaf([1.0, -2.0])
    y = Cube.apply(x)
    assert y.grad_fn.name() == "Cube" and y.tolist() == [1.0, -8.0]
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 12.0]

    a, b = leaf([1.0, 2.0]), ember.tensor([5.0, 5.0], dtype=ember.float64)
    out = ScaledAdd.apply(a, 3.0, b)
    assert out.tolist() == [8.0, 11.0]
    out.sum().backward()
    assert a.grad.tolist() == [3.0, 3.0] and b.grad is None
    assert out.grad_fn is not None


def test_needs_input_grad():
    a, b = leaf([1.0]), leaf([2.0])
    captured = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, p, k, q):
            captured["needs"] = ctx.needs_input_grad
            return p * q

        @staticmethod
        def backward(ctx, g):
            return g, None, g

    Probe.apply(a, 2, ember.tensor([1.0], dtype=ember.float64))
    assert captured["needs"] == (True, False, False)
    Probe.apply(a, 2, b)
    assert captured["needs"] == (True, False, True)
    with ember.no_grad():
        Probe.apply(a, 2, b)
    assert captured["needs"] == (False, False, False)


def test_custom_function_several_outputs_and_non_differentiable():
    x = leaf([1.5, -2.0, 3.0])
    pos, neg, mask = SplitSigns.apply(x)
    assert mask.dtype is ember.bool and not mask.requires_grad
    assert pos.grad_fn is not None and neg.grad_fn is not None
    (pos * 2 + neg * 5).sum().backward()
    assert x.grad.tolist() == [2.0, 5.0, 2.0]


def test_custom_function_double_backward():
    x = leaf([0.5, 2.0])
    y = Cube.apply(x).sum()
    (g,) = ember.autograd.grad(y, x, create_graph=True)
    assert_close(g, 3 * np.array([0.5, 2.0]) ** 2)
    g.sum().backward()
    assert_close(x.grad, 6 * np.array([0.5, 2.0]))


def test_custom_functions_pass_gradcheck():
    x = leaf(np.linspace(-1, 1, 5))
    assert ember.autograd.gradcheck(Cube.apply, (x,))
    assert ember.autograd.gradgradcheck(Cube.apply, (x,))
    a, b = leaf([0.3, 0.9]), leaf([1.0, -1.0])
    assert ember.autograd.gradcheck(lambda a, b: ScaledAdd.apply(a, 2.5, b), (a, b))
    assert ember.autograd.gradcheck(lambda t: SplitSigns.apply(t)[:2], (leaf([0.5, -0.7, 1.2]),))


def test_saved_tensors_checks():
    x = leaf([1.0, 2.0])

    class SavesInput(Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t, None)
            return t * 2

        @staticmethod
        def backward(ctx, g):
            t, nothing = ctx.saved_tensors
            assert nothing is None
            return g * 2

    y = SavesInput.apply(x)
    with ember.no_grad():
        x.add_(1)  # modifies a saved tensor
    with pytest.raises(ember.AutogradError):
        y.sum().backward()


def test_custom_function_errors():
    class WrongCount(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(ember.AutogradError, match="WrongCount"):
        WrongCount.apply(leaf([1.0]), leaf([2.0])).sum().backward()

    class Raises(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("backward failed on purpose")

    with pytest.raises(ValueError, match="on purpose"):
        Raises.apply(leaf([1.0])).sum().backward()

    class ReturnsJunk(Function):
        @staticmethod
        def forward(ctx, a):
            return "junk"

    with pytest.raises(TypeError, match="forward"):
        ReturnsJunk.apply(leaf([1.0]))

    class NoBackward(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

    with pytest.raises(NotImplementedError):
        NoBackward.apply(leaf([1.0])).sum().backward()


def test_forward_runs_without_recording():
    inner = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, a):
            t = a * 2
            inner["requires_grad"] = t.requires_grad
            return t

        @staticmethod
        def backward(ctx, g):
            return g * 2

    Probe.apply(leaf([1.0]))
    assert inner["requires_grad"] is False


# ---- gradcheck


def test_gradcheck_of_ember_ops(rng):
    x = leaf(rng.uniform(0.5, 2.0, (3, 4)))
    w = leaf(rng.standard_normal((4, 2)))
    assert ember.autograd.gradcheck(lambda x, w: (x @ w).tanh().sum(1), (x, w))
    assert ember.autograd.gradcheck(lambda x: (x.log() * x.sqrt()).softmax(1), (x,))
    assert ember.autograd.gradcheck(lambda x: x[[0, 2], 1:] * 2, (x,))
    assert ember.autograd.gradgradcheck(lambda x: (x * x.exp()).sum(), (x,))


def test_gradcheck_reports_a_wrong_backward():
    class WrongGrad(Function):
        @staticmethod
        def forward(ctx, a):
            return a * a

        @staticmethod
        def backward(ctx, g):
            return g  # should be 2 a g

    x = leaf([1.0, 2.0])
    with pytest.raises(ember.AutogradError):
        ember.autograd.gradcheck(WrongGrad.apply, (x,))
    assert ember.autograd.gradcheck(WrongGrad.apply, (x,), raise_exception=False) is False


def test_gradcheck_passes_non_tensor_arguments():
    x = leaf([1.0, 2.0])
    assert ember.autograd.gradcheck(lambda t, p: t**p, (x, 3))


def test_release_of_the_gil_does_not_break_python_callbacks():
    # backward runs with the GIL released; hooks and custom backwards re-acquire it.
    xs = [leaf(np.full(50, float(i))) for i in range(4)]
    results = [None] * 4

    def work(i):
        y = Cube.apply(xs[i])
        y.register_hook(lambda g: g * 2)
        (y.sum()).backward()
        results[i] = xs[i].grad.tolist()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert results[i] == [6.0 * i * i] * 50

"""Reverse-mode automatic differentiation: grad mode, ``grad``, ``backward``, custom ``Function``s and
``gradcheck``, as ``torch.autograd``.

Everything here runs on ember's C++ engine; Python code (hooks, custom backwards) is called back from it
with the GIL held.
"""

import functools
import inspect
import threading

from . import _ember
from ._ember import FunctionCtx, Node, RemovableHandle, Tensor, is_grad_enabled

__all__ = [
    "Function",
    "FunctionCtx",
    "Node",
    "RemovableHandle",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "inference_mode",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "no_grad",
    "set_detect_anomaly",
    "set_grad_enabled",
]


# ---- grad mode


def _decorate(fn, make_context):
    """fn run inside a fresh make_context() at each call. A generator function's body runs inside one
    at each of its steps, and the caller's own mode holds between them (PyTorch does the same): a
    context entered once at the call would be over before the first step ran."""
    if not inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with make_context():
                return fn(*args, **kwargs)

        return wrapper

    @functools.wraps(fn)
    def generator(*args, **kwargs):
        steps = fn(*args, **kwargs)
        try:
            with make_context():
                value = next(steps)
            while True:
                try:
                    sent = yield value
                except GeneratorExit:
                    steps.close()
                    raise
                except BaseException as thrown:  # passed on into fn's body, as generator.throw does
                    with make_context():
                        value = steps.throw(thrown)
                else:
                    with make_context():
                        value = steps.send(sent)
        except StopIteration as finished:  # fn returned: so does this generator, with its value
            return finished.value

    return generator


class _GradModeContext:
    """A context manager that sets grad mode on entry and restores it on exit; as a decorator, each call
    of the decorated function runs inside a fresh one (so nesting and recursion restore correctly)."""

    _enabled = True

    def __enter__(self):
        self._previous = is_grad_enabled()
        _ember._set_grad_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        _ember._set_grad_enabled(self._previous)
        return False

    def __call__(self, fn):
        return _decorate(fn, self.__class__)


class no_grad(_GradModeContext):
    """Turns recording off: ops inside make no graph (evaluation, parameter updates).

    Use as ``with ember.no_grad():`` or as a decorator. Grad mode is per thread."""

    _enabled = False


class enable_grad(_GradModeContext):
    """Turns recording on, inside a ``no_grad`` block; a context manager or a decorator."""

    _enabled = True


class inference_mode(_GradModeContext):
    """``torch.inference_mode(mode=True)``: ops inside make no graph, as in ``no_grad``. ember marks no
    tensor as made in inference mode, so results may later enter autograd (PyTorch refuses that), and
    there is nothing more to skip than the graph. ``mode=False`` turns recording on, as PyTorch's does.
    A context manager or a decorator, also without parentheses (``@ember.inference_mode``)."""

    def __new__(cls, mode=True):
        if callable(mode):  # @inference_mode without parentheses: mode is the decorated function
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self._previous = is_grad_enabled()
        self._was_inference = is_inference_mode_enabled()
        _ember._set_grad_enabled(not self.mode)
        _inference_state.enabled = self.mode
        return self

    def __exit__(self, *exc):
        _ember._set_grad_enabled(self._previous)
        _inference_state.enabled = self._was_inference
        return False

    def __call__(self, fn):
        mode = self.mode
        return _decorate(fn, lambda: inference_mode(mode))


_inference_state = threading.local()  # .enabled, False until a region sets it


def is_inference_mode_enabled():
    """Whether this thread is inside an ``inference_mode()`` region (with mode true)."""
    return getattr(_inference_state, "enabled", False)


class set_grad_enabled(_GradModeContext):
    """Sets grad mode to ``mode`` now; as a context manager, restores the previous mode on exit."""

    def __init__(self, mode):
        self._previous = is_grad_enabled()
        self._enabled = bool(mode)
        _ember._set_grad_enabled(self._enabled)

    def __enter__(self):
        return self

    def __call__(self, fn):
        # The constructor already switched the mode: put it back, then switch per call.
        _ember._set_grad_enabled(self._previous)
        mode = self._enabled
        return _decorate(fn, lambda: set_grad_enabled(mode))


class detect_anomaly(_GradModeContext):
    """While active, the first op whose forward makes NaN, or whose backward makes NaN or Inf, raises
    ``ember.AutogradError`` naming it (each check reads values back: a debugging tool)."""

    def __init__(self, check_nan=True):
        self._check = bool(check_nan)

    def __enter__(self):
        self._previous = _ember.is_anomaly_enabled()
        _ember._set_anomaly_enabled(self._check)
        return self

    def __exit__(self, *exc):
        _ember._set_anomaly_enabled(self._previous)
        return False

    def __call__(self, fn):
        check = self._check
        return _decorate(fn, lambda: detect_anomaly(check))


def set_detect_anomaly(mode):
    """Turns anomaly detection on or off for this thread (see ``detect_anomaly``)."""
    _ember._set_anomaly_enabled(bool(mode))


# ---- the engine


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradient of ``tensors`` (weighted by ``grad_tensors``; ones for one-element
    tensors) into the ``.grad`` of the leaves they depend on, or only of ``inputs`` when given.

    ``retain_graph`` defaults to ``create_graph``; ``create_graph`` records the backward itself for
    higher derivatives."""
    if retain_graph is None:
        retain_graph = create_graph
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors)
    if inputs is None:
        _ember._backward(tensors, grad_tensors, bool(retain_graph), bool(create_graph))
        return
    # ember's engine accumulates into every leaf; for chosen inputs, compute their gradients and add them.
    inputs = _as_tuple(inputs)
    if len(inputs) == 0:
        raise ValueError("backward: 'inputs' cannot be empty (None means every leaf)")
    grads = _ember._grad(tensors, inputs, grad_tensors, bool(retain_graph), bool(create_graph), True)
    for x, g in zip(inputs, grads):
        if g is None:
            continue
        if not create_graph:
            g = g.detach()
        x.grad = g if x.grad is None else x.grad + g


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """The gradients of ``outputs`` (weighted by ``grad_outputs``) with respect to each of ``inputs``, as a
    tuple, without touching any ``.grad``.

    ``create_graph=True`` records the computation, so the results can be differentiated again (double
    backward). An input the outputs do not depend on raises ``ember.AutogradError`` unless
    ``allow_unused``, which gives ``None`` for it."""
    if retain_graph is None:
        retain_graph = create_graph
    inputs = _as_tuple(inputs)
    if not inputs:  # as PyTorch: an empty tuple of gradients would hide a forgotten argument
        raise ValueError("grad: the inputs argument cannot be empty")
    return _ember._grad(
        _as_tuple(outputs),
        inputs,
        _as_tuple(grad_outputs),
        bool(retain_graph),
        bool(create_graph),
        bool(allow_unused),
    )


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Backpropagates from this tensor into the ``.grad`` of the leaves it depends on; ``gradient``
    defaults to ones for a one-element tensor. See ``ember.autograd.backward``."""
    backward(self, None if gradient is None else (gradient,), retain_graph, create_graph, inputs)


Tensor.backward = _tensor_backward


# ---- custom functions


class Function:
    """A differentiable operation with a hand-written backward, as ``torch.autograd.Function``::

        class Exp(ember.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad):
                (y,) = ctx.saved_tensors
                return grad * y

        y = Exp.apply(x)

    ``forward`` runs without recording (its ops make no graph) and returns a tensor or a tuple of them;
    ``apply`` joins the call to the graph as one node of ember's engine. ``backward`` receives one
    gradient per output and returns one entry per forward argument: a tensor, or ``None`` (for a
    non-tensor argument, or no gradient). Under ``create_graph=True`` the ops of ``backward`` are recorded,
    so double backward works when they are differentiable. ``ctx.save_for_backward`` keeps inputs or
    outputs (an in-place change to one is detected); ``ctx.needs_input_grad`` says which arguments need a
    gradient; any other attribute may be set on ``ctx``. Keep outputs in ``save_for_backward``, not as
    ctx attributes: an attribute holding an output would keep the graph alive.
    """

    @staticmethod
    def forward(ctx, *args):
        """Computes the outputs from the arguments; override it."""
        raise NotImplementedError("a custom Function must define a static forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Maps the outputs' gradients to one gradient (or None) per forward argument; override it."""
        raise NotImplementedError("a custom Function must define a static backward(ctx, *grad_outputs)")

    @classmethod
    def apply(cls, *args):
        """Runs ``forward`` on ``args`` and records ``backward`` for the result."""
        return _ember._function_apply(cls, *args)


# ---- gradient checks


def _split_inputs(fn, inputs):
    """ember's check takes tensors only: other arguments are bound into the function."""
    inputs = _as_tuple(inputs)
    positions = [i for i, x in enumerate(inputs) if isinstance(x, Tensor)]

    def tensors_only(*tensors):
        args = list(inputs)
        for i, t in zip(positions, tensors):
            args[i] = t
        return fn(*args)

    return tensors_only, [inputs[i] for i in positions]


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Checks the gradients of ``fn`` at ``inputs`` against central finite differences (ember's
    autograd::gradcheck): every floating input must be float64; those that require grad are checked.

    Returns True, or raises ``ember.AutogradError`` naming the input, the element and both values at the
    first mismatch (returns False instead when ``raise_exception`` is False)."""
    f, tensors = _split_inputs(fn, inputs)
    try:
        _ember._gradcheck(f, tensors, eps, atol, rtol, False)
    except _ember.AutogradError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Checks the second derivatives of ``fn`` (gradcheck of its vector-Jacobian product with random
    cotangents); as ``gradcheck``."""
    f, tensors = _split_inputs(fn, inputs)
    try:
        _ember._gradcheck(f, tensors, eps, atol, rtol, True)
    except _ember.AutogradError:
        if raise_exception:
            raise
        return False
    return True

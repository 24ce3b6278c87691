"""02_autograd_custom_op: reverse-mode autograd, then an op of your own with its own backward, from
Python (examples/02_autograd_custom_op.cpp's twin). Part 1 records a small graph, runs backward and
checks the gradients against the derivatives worked by hand (accumulation into .grad,
ember.autograd.grad, ember.no_grad). Part 2 defines squareplus (Barron 2021, arXiv:2112.11687:
y = (x + sqrt(x^2 + b)) / 2, a softplus made of algebra) with a kernel of its own: an
ember.autograd.Function whose forward computes in NumPy on the tensor's memory, the way C++ gives an
op its kernel (Python cannot define a C++ Primitive), and whose backward is written with ember ops.
It checks the backward against finite differences (gradcheck), its own backward too (gradgradcheck:
double backward comes free because the backward is made of differentiable ops), and that gradcheck
does catch a wrong gradient. Part 3 writes the same op the shorter way, when its forward can be made
of ember ops: a forward of ember ops and a hand-written backward, which runs on every device the ops
run on, no kernel needed.

Read next: python/ember/autograd.py (Function, grad, gradcheck), python/ember/bind_autograd.cpp
(_function_apply: how a Python Function becomes a node of the C++ engine, and how its backward is
called back with the GIL held), then the C++ it calls: autograd/function.h (custom functions: the
context, saved tensors), autograd/engine.cpp (backward: the nodes in dependency order),
autograd/gradcheck.h (gradcheck, gradgradcheck), tensor/primitive.h (how a C++ op becomes an autograd
node, for an op that belongs in the library: docs/code.md's "How to add an op").

    PYTHONPATH=build/python python3 examples/python/02_autograd_custom_op.py
"""

import argparse

import numpy as np

import ember
from ladder_checks import run_checked


class Squareplus(ember.autograd.Function):
    """squareplus with its own kernel. apply() runs forward with grad mode off and records one node of
    ember's engine for the result, which keeps what save_for_backward was given (here the input x,
    which backward reads)."""

    @staticmethod
    def forward(ctx, x, b):
        ctx.save_for_backward(x)
        ctx.b = b
        # The kernel: NumPy on a view of x's memory (no copy in); the result array becomes the output
        # without a copy either (ember.from_numpy). 16-bit floats compute in float32 and round once,
        # as ember's own kernels do.
        v = np.asarray(x.detach().contiguous())
        c = v.astype(np.float32) if v.dtype == np.float16 else v
        return ember.from_numpy(((c + np.sqrt(c * c + b)) / 2).astype(v.dtype))

    @staticmethod
    def backward(ctx, grad):
        # dL/dx = dL/dy * dy/dx with dy/dx = (1 + x / sqrt(x^2 + b)) / 2. ember ops only, so backward can
        # itself be recorded (create_graph) and differentiated again. One entry per forward argument:
        # x's gradient, and None for the number b.
        (x,) = ctx.saved_tensors
        return grad * ((x / (x * x + ctx.b).sqrt() + 1.0) * 0.5), None


def squareplus(x, b=4.0):
    """The op's front end: checks its arguments (messages show the values), then applies the function."""
    if not b > 0:
        raise ember.ValueError(f"squareplus: b must be positive, got {b}")
    if not x.is_cpu:
        raise ember.NotImplementedError(f"squareplus: the NumPy kernel runs on the CPU, got a tensor on {x.device}")
    return Squareplus.apply(x, b)


class SquareplusFunction(ember.autograd.Function):
    """squareplus again, forward made of ember ops (recorded as nothing: apply() runs it with grad mode
    off), backward written by hand from what forward saved."""

    @staticmethod
    def forward(ctx, x, b):
        # Inputs and outputs only: an intermediate made here has no history (grad mode was off), so a
        # double backward through it would miss its x.
        ctx.save_for_backward(x)
        ctx.b = b
        return (x + (x * x + b).sqrt()) * 0.5

    backward = Squareplus.backward  # the same derivative


def composed(x, b=4.0):
    """squareplus as a composition of ember ops, each with its own recorded node."""
    return (x + (x * x + b).sqrt()) * 0.5


def x_for(seed):
    """A float64 (3, 4) input that requires grad, spread over [-9, 9] or so (gradcheck wants float64)."""
    return (ember.randn(3, 4, dtype=ember.float64, generator=ember.Generator(seed)) * 3.0).requires_grad_()


def autograd_basics(checks):
    print("\n== autograd: record, backward, read .grad")
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = ember.tensor([0.5, -1.0, 2.0], requires_grad=True)
    loss = (w * x * x).sum()  # L = sum_i w_i x_i^2
    print(f"L = {loss}")
    checks.expect(loss.grad_fn is not None and loss.grad_fn.name() == "sum",
                  "the result of a recorded op points at its node (grad_fn): the graph is built as ops run")
    loss.backward(retain_graph=True)
    print(f"dL/dx = {x.grad}, dL/dw = {w.grad}")
    xs, ws = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    checks.expect(np.array_equal(np.asarray(x.grad), 2 * ws * xs), "dL/dx_i = 2 w_i x_i")
    checks.expect(np.array_equal(np.asarray(w.grad), xs**2), "dL/dw_i = x_i^2")
    loss.backward()  # the graph was retained: a second backward adds to .grad
    checks.expect(np.array_equal(np.asarray(w.grad), 2 * xs**2), "backward accumulates into .grad")
    # ember.autograd.grad returns gradients without touching .grad (what a gradient penalty needs, step 8).
    (gx,) = ember.autograd.grad((x * x).sum(), [x])
    checks.expect(np.array_equal(np.asarray(gx), 2 * xs), "ember.autograd.grad((x * x).sum(), [x]) = 2x")
    with ember.no_grad():
        checks.expect(not (x * 2).requires_grad, "under ember.no_grad() nothing is recorded")


def expect_gradchecks(checks, fn, x):
    """gradcheck and gradgradcheck of fn at x, in float64: every entry of the Jacobian, numerical
    (central differences) against what backward gives; then the same of backward's own backward."""
    checks.expect(ember.autograd.gradcheck(fn, [x.detach().requires_grad_()], raise_exception=False),
                  "gradcheck passes: backward matches finite differences")
    checks.expect(ember.autograd.gradgradcheck(fn, [x.detach().requires_grad_()], raise_exception=False),
                  "gradgradcheck passes: backward is made of ember ops, so it is differentiable in turn")


def custom_op(checks):
    print("\n== a custom op: squareplus with a NumPy kernel")
    x = x_for(7)
    y = squareplus(x)
    print(f"squareplus({x[0].detach()})\n  = {y[0].detach()}")
    checks.expect(ember.allclose(y, composed(x), 1e-12, 1e-12), "the kernel computes (x + sqrt(x^2 + b)) / 2")
    checks.expect(y.grad_fn.name() == "Squareplus", "its output's grad_fn is the function's node, named by its class")
    (g_custom,) = ember.autograd.grad(y.sum(), [x])
    (g_composed,) = ember.autograd.grad(composed(x).sum(), [x])
    checks.expect(ember.allclose(g_custom, g_composed, 1e-12, 1e-12),
                  "its backward gives the gradient autograd derives for the composition of ember's ops")
    expect_gradchecks(checks, squareplus, x)

    # The check is only worth something if it fails on a wrong gradient: a hook that doubles
    # squareplus's gradient stands in for a backward that forgot its factor 1/2.
    def wrong(t):
        out = squareplus(t)
        if out.requires_grad:
            out.register_hook(lambda g: g * 2)
        return out

    checks.expect_raises(ember.AutogradError, lambda: ember.autograd.gradcheck(wrong, [x.detach().requires_grad_()]),
                         "gradcheck rejects a wrong gradient, naming the entry and both values",
                         "gradcheck on a doubled gradient")


def custom_function(checks):
    print("\n== the same op as a Function of ember ops: ember ops forward, a backward by hand")
    x = x_for(8)
    y = SquareplusFunction.apply(x, 4.0)
    checks.expect(ember.allclose(y, squareplus(x), 1e-12, 1e-12), "it computes what the NumPy kernel computes")
    [(next_node, _)] = y.grad_fn.next_functions
    checks.expect(y.grad_fn.name() == "SquareplusFunction" and next_node.name() == "accumulate_grad",
                  "apply() records one node, the function's, however many ops forward ran: the next is x's "
                  "accumulate_grad")
    expect_gradchecks(checks, lambda t: SquareplusFunction.apply(t, 4.0), x)


def main():
    argparse.ArgumentParser(description="Step 2 of the example ladder: autograd, and a custom op whose backward "
                            "gradcheck verifies.").parse_args()

    def body(checks):
        for part in (autograd_basics, custom_op, custom_function):
            part(checks)

    run_checked("02_autograd_custom_op", body)


if __name__ == "__main__":
    main()

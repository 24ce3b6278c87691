"""Shared fixtures of the Python tests: NumPy references and per-dtype tolerances."""

import numpy as np
import pytest

# The package under test: the one built in build/python (`./ember test` sets PYTHONPATH to it), or an
# installed one (pip install .).
import ember

# Relative tolerance of one result element against a float64 NumPy reference computed from the same
# (already rounded) inputs: about twice the worst error measured over the unary ops (2000 points each):
# float32 4.4e-7 (erf), float16 4.9e-4 and bfloat16 3.9e-3 (sqrt), which are the result's rounding
# (half an ulp: 2^-11 for float16, 2^-8 for bfloat16). Reductions and matmul scale these per test.
RTOL = {
    ember.float64: 1e-12,
    ember.float32: 1e-6,
    ember.float16: 1e-3,
    ember.bfloat16: 8e-3,
}
ATOL = {
    ember.float64: 1e-12,
    ember.float32: 1e-6,
    ember.float16: 1e-3,
    ember.bfloat16: 8e-3,
}
FLOAT_DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16]


def to_numpy(t):
    """A float64 (or integer/bool) NumPy copy of any tensor, bfloat16 and CUDA included."""
    t = t.detach().cpu()
    if t.is_floating_point():
        t = t.double()
    return np.array(t)


def assert_close(actual, expected, dtype=None, rtol=None, atol=None):
    """Compares a tensor with a NumPy reference using the dtype's tolerances."""
    dtype = dtype or actual.dtype
    got = to_numpy(actual)
    np.testing.assert_allclose(
        got,
        np.asarray(expected, dtype=got.dtype if got.dtype != np.float64 else np.float64),
        rtol=RTOL.get(dtype, 0) if rtol is None else rtol,
        atol=ATOL.get(dtype, 0) if atol is None else atol,
    )


@pytest.fixture
def rng():
    """A NumPy generator with a fixed seed, so failures reproduce."""
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _seed_and_grad_mode():
    """Each test starts from the same ember seed, with grad mode on."""
    ember.manual_seed(0)
    ember.set_grad_enabled(True)
    yield
    ember.set_grad_enabled(True)

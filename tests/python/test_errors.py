"""ember's C++ exceptions arrive as Python exceptions of the matching kind, with ember's message."""

import pytest

import ember


def test_error_hierarchy():
    assert issubclass(ember.Error, RuntimeError)
    expected = {
        ember.ShapeError: ValueError,
        ember.DTypeError: TypeError,
        ember.IndexError: IndexError,
        ember.ValueError: ValueError,
        ember.NotImplementedError: NotImplementedError,
        ember.DeviceError: RuntimeError,
        ember.AutogradError: RuntimeError,
        ember.StateError: RuntimeError,
        ember.UndefinedTensorError: RuntimeError,
        ember.CudaError: RuntimeError,
        ember.OutOfMemoryError: RuntimeError,
        ember.CaptureError: RuntimeError,
        ember.IOError: OSError,
    }
    for cls, builtin in expected.items():
        assert issubclass(cls, ember.Error) and issubclass(cls, builtin), cls
        assert cls.__module__ == "ember"
    assert issubclass(ember.NotDeterministicError, ember.NotImplementedError)


def test_shape_mismatch_is_a_shape_error_and_a_value_error():
    with pytest.raises(ember.ShapeError) as info:
        ember.ones(2, 3) + ember.ones(4)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ember.Error)
    message = str(info.value)
    assert "(2, 3)" in message and "(4" in message  # ember's text names both shapes
    with pytest.raises(ValueError):
        ember.ones(2, 3) @ ember.ones(2, 3)
    with pytest.raises(ember.ShapeError, match="view"):
        ember.ones(2, 3).view(4)


def test_bad_dtype_is_a_type_error():
    with pytest.raises(TypeError) as info:
        ember.tensor([True]) + ember.tensor([True])
    assert isinstance(info.value, ember.DTypeError)
    with pytest.raises(ember.DTypeError, match="int"):
        ember.arange(3).requires_grad_()


def test_out_of_range_is_an_index_error():
    with pytest.raises(IndexError) as info:
        ember.zeros(3)[5]
    assert isinstance(info.value, ember.IndexError) and "5" in str(info.value)
    with pytest.raises(ember.IndexError, match="dim"):
        ember.zeros(2, 2).sum(dim=5)
    with pytest.raises(ember.IndexError):
        ember.zeros(2).transpose(0, 3)


def test_value_and_autograd_errors_carry_ember_messages():
    with pytest.raises(ember.ValueError, match="step"):
        ember.arange(0, 3, 0)
    with pytest.raises(ember.AutogradError, match="does not require grad"):
        ember.ones(1).retain_grad()


def test_python_level_misuse_raises_type_errors_not_crashes():
    with pytest.raises(TypeError):
        ember.ones(2) + "a"
    with pytest.raises(TypeError):
        ember.zeros("x")
    with pytest.raises(TypeError):
        ember.ones(2).sum(dim="a")
    with pytest.raises(TypeError):
        ember.tensor(object())
    with pytest.raises(TypeError):
        ember.ones(2).to(3.5)


def test_errors_inside_callbacks_keep_their_type():
    # An ember error raised by an op inside a hook reaches the caller as that ember error.
    x = ember.ones(2, requires_grad=True)
    x.register_hook(lambda g: g + ember.ones(5))
    with pytest.raises(ember.ShapeError):
        (x * 2).sum().backward()

"""Tensors as Python objects: dtypes and devices, the factories, metadata, host access, conversions,
repr and the number protocols."""

import copy
import pickle

import numpy as np
import pytest

import ember
from conftest import assert_close, to_numpy


# ---- dtypes and devices


def test_dtypes_are_module_singletons():
    assert repr(ember.float32) == "ember.float32"
    assert ember.float is ember.float32
    assert ember.half is ember.float16
    assert ember.double is ember.float64
    assert ember.long is ember.int64
    assert ember.int is ember.int32
    assert ember.zeros(2).dtype is ember.float32
    assert ember.zeros(2, dtype=ember.bfloat16).dtype is ember.bfloat16
    assert ember.float16.is_floating_point and not ember.int64.is_floating_point
    assert [d.itemsize for d in (ember.float32, ember.float16, ember.bfloat16, ember.float64)] == [4, 2, 2, 8]
    assert (ember.int32.itemsize, ember.int64.itemsize, ember.uint8.itemsize, ember.bool.itemsize) == (4, 8, 1, 1)


def test_dtype_spellings_accepted_as_arguments():
    assert ember.zeros(1, dtype="float64").dtype is ember.float64
    assert ember.zeros(1, dtype=float).dtype is ember.float64  # as torch: Python float is float64
    assert ember.zeros(1, dtype=int).dtype is ember.int64
    assert ember.zeros(1, dtype=bool).dtype is ember.bool
    assert ember.zeros(1, dtype=np.float16).dtype is ember.float16
    assert ember.zeros(1, dtype=np.dtype("int32")).dtype is ember.int32
    with pytest.raises(TypeError):
        ember.zeros(1, dtype="complex64")


def test_dtype_pickles_to_the_same_object():
    assert pickle.loads(pickle.dumps(ember.bfloat16)) is ember.bfloat16


def test_devices_from_strings_and_objects():
    assert ember.device("cpu").type == "cpu" and ember.device("cpu").index is None
    d = ember.device("cuda:1")
    assert (d.type, d.index, str(d)) == ("cuda", 1, "cuda:1")
    assert ember.device("cuda", 0) == ember.device("cuda:0") == "cuda:0"
    assert repr(ember.device("cpu")) == "device(type='cpu')"
    assert ember.zeros(2, device="cpu").device == ember.device("cpu")
    assert ember.zeros(2, device=ember.device("cpu")).is_cpu
    with pytest.raises(ember.DeviceError, match="tpu"):
        ember.device("tpu")
    with pytest.raises(ember.DeviceError, match="unknown device type 'tpu'"):
        ember.device("tpu", 0)
    with pytest.raises(ember.DeviceError, match="from 0 to 127"):
        ember.device("cuda", -5)
    with pytest.raises(ember.DeviceError, match="from 0 to 127"):
        ember.device("cuda", 300)  # Device::index is an int8_t: 300 would be 44
    with pytest.raises(ember.DeviceError, match="up to 127"):
        ember.device("cuda:256")
    with pytest.raises(ember.DeviceError, match="only CUDA devices have an index"):
        ember.device("cpu", 1)
    assert hash(ember.device("cpu")) == hash(ember.device("cpu"))


def test_a_bad_device_or_dtype_string_raises_and_prints_nothing(capfd):
    with pytest.raises(TypeError, match="device"):
        ember.zeros(2, device="gpu")
    with pytest.raises(TypeError, match="dtype"):
        ember.zeros(2, dtype="flaot32")
    with pytest.raises(TypeError):
        ember.ones(2).to("cuda:x")
    assert capfd.readouterr().err == ""


@pytest.mark.skipif(ember.cuda.is_available(), reason="checks the error without a GPU")
def test_cuda_without_a_gpu_raises_device_error():
    with pytest.raises(ember.DeviceError):
        ember.zeros(2, device="cuda")
    with pytest.raises(ember.DeviceError):
        ember.zeros(2).cuda()


# ---- factories


def test_sizes_as_varargs_or_one_sequence():
    for f in (ember.zeros, ember.ones, ember.empty, ember.rand, ember.randn):
        assert f(2, 3).shape == (2, 3)
        assert f((2, 3)).shape == (2, 3)
        assert f([4]).shape == (4,)
        assert f(ember.Size([1, 2])).shape == (1, 2)
        assert f(np.int64(3)).shape == (3,)
    assert ember.zeros(()).shape == ()
    assert ember.zeros(0, 3).numel() == 0
    with pytest.raises(TypeError, match="size"):
        ember.zeros(2.5)
    with pytest.raises(TypeError, match="size"):
        ember.zeros(True, False)  # a bool is an int to Python, not a size


def test_factory_keywords():
    t = ember.ones(2, 2, dtype=ember.float64, device="cpu", requires_grad=True)
    assert t.dtype is ember.float64 and t.requires_grad and t.is_leaf
    assert to_numpy(ember.ones(3, dtype=ember.int64)).tolist() == [1, 1, 1]
    assert ember.full((2, 2), 7).dtype is ember.int64
    assert ember.full((2, 2), 7.5).dtype is ember.float32
    assert ember.full((2,), True).dtype is ember.bool
    assert ember.full((2,), 3, dtype=ember.float16).tolist() == [3.0, 3.0]
    assert ember.scalar_tensor(2.5).shape == ()


def test_tensor_from_nested_lists_and_numbers():
    t = ember.tensor([[1, 2, 3], [4, 5, 6]])
    assert t.dtype is ember.int64 and t.shape == (2, 3) and t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert ember.tensor([1, 2.5]).dtype is ember.float32
    assert ember.tensor([True, False]).dtype is ember.bool
    assert ember.tensor(3).shape == () and ember.tensor(3).item() == 3
    assert ember.tensor(2.5, dtype=ember.float64).item() == 2.5
    assert ember.tensor([]).shape == (0,) and ember.tensor([]).dtype is ember.float32
    assert ember.tensor([[], []]).shape == (2, 0)
    assert ember.tensor([2**62]).item() == 2**62  # ints stay exact
    assert ember.tensor([ember.tensor(1.5), 2]).tolist() == [1.5, 2.0]
    assert ember.tensor((1, 2), dtype=ember.float16).dtype is ember.float16
    with pytest.raises(ValueError, match="rectangular"):
        ember.tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        ember.tensor(["a"])


@pytest.mark.parametrize(
    "data,dtype",
    [([300], "uint8"), ([-129], "uint8"), ([2**40], "int32"), (2**31, "int32"), ([1.5e10], "int32"),
     ([float("nan")], "int64"), (float("inf"), "int32"), ([2.0**63], "int64")],
)
def test_numbers_that_do_not_fit_an_integer_dtype_raise(data, dtype):
    # PyTorch's rule: an OverflowError naming the value and the dtype, never a silent wrap.
    with pytest.raises(OverflowError, match=f"does not fit in {dtype}"):
        ember.tensor(data, dtype=getattr(ember, dtype))


def test_numbers_at_the_edges_of_integer_dtypes_are_kept():
    assert ember.tensor([-128, -1, 255], dtype=ember.uint8).tolist() == [128, 255, 255]  # PyTorch wraps these
    assert ember.tensor([-(2**31), 2**31 - 1], dtype=ember.int32).tolist() == [-(2**31), 2**31 - 1]
    assert ember.tensor([-(2.0**63)], dtype=ember.int64).tolist() == [-(2**63)]
    assert ember.tensor([2.9, -2.9], dtype=ember.int32).tolist() == [2, -2]
    assert ember.tensor([1e6, float("inf")], dtype=ember.float16).tolist() == [float("inf")] * 2
    assert ember.tensor([5, 0], dtype=ember.bool).tolist() == [True, False]


def test_tensor_from_numpy_copies_and_keeps_dtype(rng):
    for np_dtype, dtype in [
        (np.float32, ember.float32),
        (np.float64, ember.float64),
        (np.float16, ember.float16),
        (np.int32, ember.int32),
        (np.int64, ember.int64),
        (np.uint8, ember.uint8),
        (np.bool_, ember.bool),
    ]:
        a = (rng.standard_normal((3, 4)) * 10).astype(np_dtype)
        t = ember.tensor(a)
        assert t.dtype is dtype and t.shape == (3, 4)
        np.testing.assert_array_equal(np.asarray(t), a)
        assert t.data_ptr() != a.ctypes.data  # a copy
    strided = np.arange(24.0).reshape(4, 6)[::2, 1::2]
    np.testing.assert_array_equal(np.asarray(ember.tensor(strided)), strided)
    assert ember.tensor(np.float64(2.5)).item() == 2.5
    with pytest.raises(ember.DTypeError, match="int16"):
        ember.tensor(np.zeros(2, dtype=np.int16))


def test_tensor_from_tensor_copies_without_history():
    a = ember.ones(3, requires_grad=True)
    b = ember.tensor(a)
    assert not b.requires_grad and b.data_ptr() != a.data_ptr()


def test_arange_linspace_eye():
    assert ember.arange(5).tolist() == [0, 1, 2, 3, 4] and ember.arange(5).dtype is ember.int64
    assert ember.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert ember.arange(0, 10, 3, dtype=ember.float64).dtype is ember.float64
    assert_close(ember.linspace(-1, 1, 7), np.linspace(-1, 1, 7))
    assert ember.linspace(0, 1, 1).tolist() == [0.0]
    assert_close(ember.linspace(0, 3, 4, dtype=ember.float64), np.linspace(0, 3, 4))
    np.testing.assert_array_equal(to_numpy(ember.eye(3)), np.eye(3))
    np.testing.assert_array_equal(to_numpy(ember.eye(2, 4, dtype=ember.int64)), np.eye(2, 4))
    with pytest.raises(ember.ValueError):
        ember.arange(0, 5, 0)


def test_random_factories_are_seeded():
    ember.manual_seed(7)
    a = ember.randn(100)
    ember.manual_seed(7)
    b = ember.randn(100)
    assert ember.equal(a, b)
    u = ember.rand(10000)
    assert 0 <= u.min().item() and u.max().item() < 1 and abs(u.mean().item() - 0.5) < 0.02
    n = ember.randn(10000, dtype=ember.float64)
    assert abs(n.mean().item()) < 0.05 and abs(n.std().item() - 1) < 0.05
    r = ember.randint(3, 7, (1000,))
    assert r.dtype is ember.int64 and r.min().item() >= 3 and r.max().item() <= 6
    assert ember.randint(5, (2, 2)).shape == (2, 2)
    g = ember.Generator(3)
    x = ember.rand(4, generator=g)
    g.manual_seed(3)
    assert ember.equal(x, ember.rand(4, generator=g))
    state = g.get_state()
    y = ember.rand(4, generator=g)
    g.set_state(state)
    assert ember.equal(y, ember.rand(4, generator=g))
    assert ember.initial_seed() == 7


def test_like_and_new_factories():
    base = ember.ones(2, 3, dtype=ember.float64)
    assert ember.zeros_like(base).dtype is ember.float64 and ember.zeros_like(base).shape == (2, 3)
    assert ember.ones_like(base, dtype=ember.int32).dtype is ember.int32
    assert ember.full_like(base, 4).tolist() == [[4.0] * 3] * 2
    assert ember.empty_like(base).shape == (2, 3)
    assert ember.rand_like(base).dtype is ember.float64 and ember.randn_like(base).shape == (2, 3)
    assert base.new_zeros(4).dtype is ember.float64
    assert base.new_ones((1, 2)).shape == (1, 2)
    assert base.new_full((2,), 5).tolist() == [5.0, 5.0]
    assert base.new_tensor([1, 2]).dtype is ember.float64
    assert base.new_empty(3).shape == (3,)


# ---- metadata and host access


def test_metadata():
    t = ember.zeros(2, 3, 4)
    assert isinstance(t.shape, tuple) and isinstance(t.shape, ember.Size)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24 and len(t) == 2
    assert t.stride() == (12, 4, 1) and t.stride(0) == 12
    assert t.is_contiguous() and not t.transpose(0, 2).is_contiguous()
    assert t.element_size() == 4 and t.nbytes == 96 and t.itemsize == 4
    assert t.shape.numel() == 24
    assert repr(t.shape) == "ember.Size([2, 3, 4])"
    assert t.shape[1:] == (3, 4) and isinstance(t.shape[1:], ember.Size)
    with pytest.raises(ember.IndexError):
        t.size(3)
    with pytest.raises(TypeError):
        len(ember.tensor(1.0))


def test_item_tolist_and_number_protocols():
    assert ember.tensor([[1.5, 2.0]]).tolist() == [[1.5, 2.0]]
    assert ember.tensor(2.5).tolist() == 2.5
    assert ember.tensor([1, 2], dtype=ember.int32).tolist() == [1, 2]
    assert ember.tensor([True]).tolist() == [True]
    x = ember.tensor([3.25])
    assert x.item() == 3.25 and float(x) == 3.25 and int(x) == 3 and bool(x)
    assert isinstance(ember.tensor(3).item(), int) and isinstance(ember.tensor(True).item(), bool)
    assert [10, 20, 30][ember.tensor(1)] == 20  # __index__
    with pytest.raises(TypeError):
        [1][ember.tensor(0.0)]
    with pytest.raises(ember.ShapeError, match="item"):
        ember.zeros(2).item()
    with pytest.raises(ValueError, match="one-element"):
        bool(ember.zeros(2))
    assert ember.tensor(1.0) in ember.tensor([0.0, 1.0]) and 5 not in ember.tensor([1, 2])
    assert f"{ember.tensor(2.5):.2f}" == "2.50"
    assert [r.tolist() for r in ember.tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]
    with pytest.raises(TypeError):
        iter(ember.tensor(1))


def test_hash_is_identity_and_tensors_work_in_sets():
    a, b = ember.zeros(2), ember.zeros(2)
    assert len({a, b, a}) == 2 and hash(a) == hash(a)


def test_repr_like_pytorch():
    assert repr(ember.tensor([[1.0, 2.5], [3.0, 4.0]])) == "tensor([[1.0000, 2.5000],\n        [3.0000, 4.0000]])"
    assert repr(ember.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(ember.tensor([1.0], dtype=ember.float64)) == "tensor([1.], dtype=ember.float64)"
    assert repr(ember.ones(2, requires_grad=True)) == "tensor([1., 1.], requires_grad=True)"
    y = ember.ones(2, requires_grad=True) * 2
    assert repr(y) == "tensor([2., 2.], grad_fn=<mul>)"
    assert str(ember.tensor([True, False])) == "tensor([ True, False])"
    assert "..." in repr(ember.zeros(5000))


def test_conversions():
    t = ember.tensor([1.7, -2.2])
    assert t.to(ember.int64).tolist() == [1, -2]
    assert t.to(ember.float32) is t or t.to(ember.float32).data_ptr() == t.data_ptr()  # nothing to do
    assert t.to(ember.float32, copy=True).data_ptr() != t.data_ptr()
    assert t.to("cpu").device == "cpu"
    assert t.to(device="cpu", dtype=ember.float64).dtype is ember.float64
    assert t.to(ember.zeros(1, dtype=ember.float16)).dtype is ember.float16
    assert t.float().dtype is ember.float32 and t.double().dtype is ember.float64
    assert t.half().dtype is ember.float16 and t.bfloat16().dtype is ember.bfloat16
    assert t.long().dtype is ember.int64 and t.int().dtype is ember.int32
    assert t.bool().tolist() == [True, True] and t.byte().dtype is ember.uint8
    assert t.cpu().data_ptr() == t.data_ptr()
    assert t.type_as(ember.zeros(1, dtype=ember.float64)).dtype is ember.float64


def test_detach_clone_contiguous():
    a = ember.arange(6.0).reshape(2, 3).requires_grad_()
    d = a.detach()
    assert d.data_ptr() == a.data_ptr() and not d.requires_grad
    c = a.clone()
    assert c.data_ptr() != a.data_ptr() and c.requires_grad and c.grad_fn is not None
    t = a.detach().t()
    assert not t.is_contiguous() and t.contiguous().is_contiguous()
    assert t.contiguous().tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    x = ember.ones(2)
    assert x.contiguous().data_ptr() == x.data_ptr()


def test_copy_deepcopy_and_pickle():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = copy.deepcopy(a)
    assert b.requires_grad and b.is_leaf and b.data_ptr() != a.data_ptr() and b.tolist() == a.tolist()
    c = copy.copy(a)
    assert c.tolist() == a.tolist() and not c.requires_grad
    for t in (a, ember.tensor([1, 2], dtype=ember.int32), ember.tensor([1.5, -2.0], dtype=ember.bfloat16)):
        u = pickle.loads(pickle.dumps(t))
        assert u.dtype is t.dtype and u.tolist() == t.tolist() and u.requires_grad == t.requires_grad


def test_tensor_constructor_aliases_storage_for_subclasses():
    class Param(ember.Tensor):
        pass

    data = ember.ones(3)
    p = Param(data)
    assert isinstance(p, Param) and isinstance(p, ember.Tensor)
    assert p.data_ptr() == data.data_ptr()
    p.requires_grad_()
    assert p.requires_grad and not data.requires_grad
    assert ember.Tensor().shape == (0,)

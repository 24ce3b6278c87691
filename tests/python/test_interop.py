"""Zero-copy exchange: the buffer protocol, __array_interface__ and DLPack, both ways. Sharing is
checked by pointer equality and by writes seen on the other side; lifetimes by deleting the original."""

import gc
import mmap
import struct
import subprocess
import sys
import weakref

import numpy as np
import pytest

import ember


def _foreign_count():
    return ember._ember._foreign_memory_count()


# ---- ember -> NumPy


@pytest.mark.parametrize(
    "dtype,np_dtype",
    [
        (ember.float32, np.float32),
        (ember.float64, np.float64),
        (ember.float16, np.float16),
        (ember.int32, np.int32),
        (ember.int64, np.int64),
        (ember.uint8, np.uint8),
        (ember.bool, np.bool_),
    ],
    ids=repr,
)
def test_numpy_views_tensor_memory(dtype, np_dtype):
    t = ember.ones(2, 3, dtype=dtype)
    a = np.asarray(t)
    assert a.dtype == np_dtype and a.shape == (2, 3)
    assert a.ctypes.data == t.data_ptr()
    assert t.numpy().ctypes.data == t.data_ptr()
    assert np.array(t, copy=False).ctypes.data == t.data_ptr()
    assert memoryview(t).format in "fdeiqB?" and not memoryview(t).readonly


def test_writes_are_seen_both_ways():
    t = ember.zeros(2, 3)
    a = np.asarray(t)
    a[1, 2] = 5.0
    assert t[1, 2].item() == 5.0
    t[0, 0] = -3.0
    t.add_(1)
    assert a[0, 0] == -2.0 and a[1, 2] == 6.0


def test_array_keeps_the_tensor_memory_alive():
    t = ember.arange(1000.0)
    a = np.asarray(t)
    ptr = t.data_ptr()
    del t
    gc.collect()
    ember.zeros(1000)  # would likely reuse freed memory
    assert a.ctypes.data == ptr
    np.testing.assert_array_equal(a, np.arange(1000.0))


def test_strided_tensors_export_with_strides():
    t = ember.arange(24.0).reshape(4, 6)
    view = t.t()[1:, ::2]  # transposed and stepped
    a = np.asarray(view)
    assert a.ctypes.data == view.data_ptr()
    assert a.strides == tuple(s * 4 for s in view.stride())
    np.testing.assert_array_equal(a, np.arange(24.0, dtype=np.float32).reshape(4, 6).T[1:, ::2])
    iface = view.__array_interface__
    assert iface["strides"] == a.strides and iface["data"][0] == view.data_ptr()
    assert t.__array_interface__["strides"] is None  # contiguous
    assert not memoryview(view).c_contiguous


def test_zero_dim_and_empty_tensors():
    assert np.asarray(ember.tensor(2.5)).shape == () and np.asarray(ember.tensor(2.5)) == 2.5
    assert np.asarray(ember.zeros(0, 3)).shape == (0, 3)


def test_bfloat16_refused_by_numpy_interfaces_with_a_clear_type_error():
    t = ember.ones(3, dtype=ember.bfloat16)
    with pytest.raises(TypeError, match="bfloat16"):
        t.__array_interface__
    with pytest.raises(TypeError, match="bfloat16"):
        np.asarray(t)
    with pytest.raises(TypeError, match="bfloat16"):
        t.numpy()
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(t)
    # NumPy takes the capsule, refuses its dtype and drops it: its own error arrives (dropping the
    # capsule once cleared it, and Python raised SystemError instead).
    with pytest.raises(RuntimeError, match="dtype"):
        np.from_dlpack(t)
    np.testing.assert_array_equal(t.float().numpy(), np.ones(3, np.float32))


def test_requires_grad_tensors_are_not_exported_without_detach():
    t = ember.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="detach"):
        np.asarray(t)
    with pytest.raises(ember.AutogradError, match="detach"):
        t.__dlpack__()
    assert np.asarray(t.detach()).ctypes.data == t.data_ptr()
    assert t.numpy(force=True).tolist() == [1.0, 1.0]


def test_array_dtype_and_copy_arguments():
    t = ember.ones(3)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    c = np.array(t)  # copy=True by default
    assert c.ctypes.data != t.data_ptr()
    assert t.__array__(copy=True).ctypes.data != t.data_ptr()


# ---- DLPack out of ember


def test_numpy_from_dlpack_shares_memory():
    t = ember.arange(6.0, dtype=ember.float64).reshape(2, 3)
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr() and a.dtype == np.float64
    a[0, 1] = 42.0
    assert t[0, 1].item() == 42.0
    del t
    gc.collect()
    assert a[0, 1] == 42.0 and a[1, 2] == 5.0  # the capsule keeps the tensor


def test_dlpack_device_and_capsules():
    t = ember.ones(2)
    assert t.__dlpack_device__() == (1, 0)
    legacy = t.__dlpack__()
    assert "dltensor" in repr(legacy)
    versioned = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(versioned)
    # An unconsumed capsule frees what it holds when collected (no leak, no crash).
    del legacy, versioned
    gc.collect()
    copy = t.__dlpack__(copy=True)
    back = ember.from_dlpack(copy)
    assert back.data_ptr() != t.data_ptr()


def test_strided_and_bfloat16_tensors_over_dlpack():
    t = ember.arange(12.0).reshape(3, 4).t()
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr() and a.strides == (4, 16)
    b = ember.ones(3, dtype=ember.bfloat16)
    capsule = b.__dlpack__()
    again = ember.from_dlpack(capsule)
    assert again.dtype is ember.bfloat16 and again.data_ptr() == b.data_ptr()
    with pytest.raises(TypeError):
        ember.from_dlpack(capsule)  # consumed


def test_round_trip_through_ember_capsule_keeps_the_storage():
    t = ember.arange(5.0)
    u = ember.from_dlpack(ember.to_dlpack(t))
    assert u.data_ptr() == t.data_ptr() and _foreign_count() == 0
    u[0] = 9.0
    assert t[0].item() == 9.0
    assert ember.from_dlpack(t).data_ptr() == t.data_ptr()


# ---- DLPack into ember


@pytest.mark.parametrize(
    "np_dtype,dtype",
    [(np.float32, ember.float32), (np.float64, ember.float64), (np.float16, ember.float16), (np.int32, ember.int32),
     (np.int64, ember.int64), (np.uint8, ember.uint8), (np.bool_, ember.bool)],
)
def test_from_dlpack_numpy_shares_memory(np_dtype, dtype):
    a = np.arange(6).astype(np_dtype).reshape(2, 3)
    t = ember.from_dlpack(a)
    assert t.dtype is dtype and t.shape == (2, 3)
    assert t.data_ptr() == a.ctypes.data
    np.testing.assert_array_equal(np.asarray(t), a)


def test_from_dlpack_writes_both_ways_and_ops_work():
    a = np.zeros((3, 4), dtype=np.float32)
    t = ember.from_dlpack(a)
    a[2, 3] = 7.0
    assert t[2, 3].item() == 7.0
    t[0] = 1.0
    t.mul_(2)
    assert a[0].tolist() == [2.0] * 4 and a[2, 3] == 14.0
    assert (t + 1).sum().item() == 12 + 8 + 14


def test_from_dlpack_keeps_the_producer_alive_and_releases_it():
    class Owner(np.ndarray):
        pass

    a = np.arange(10.0).view(Owner)
    alive = weakref.ref(a)
    t = ember.from_dlpack(a)
    del a
    gc.collect()
    assert alive() is not None  # ember's tensor holds the array
    np.testing.assert_array_equal(np.asarray(t), np.arange(10.0))
    before = _foreign_count()
    del t
    gc.collect()
    assert alive() is None and _foreign_count() == before - 1


def test_views_of_imported_memory_outlive_the_first_tensor():
    a = np.arange(8.0)
    alive = weakref.ref(a.base if a.base is not None else a)
    t = ember.from_dlpack(a)
    view = t[2:5]
    del t, a
    gc.collect()
    assert view.tolist() == [2.0, 3.0, 4.0]
    del view  # the last view: the memory goes back to NumPy at once
    assert _foreign_count() == 0 and alive() is None


def test_from_dlpack_strided_numpy():
    a = np.arange(24.0).reshape(4, 6)[::2, 1::2]
    t = ember.from_dlpack(a)
    assert t.stride() == (12, 2) and t.data_ptr() == a.ctypes.data
    np.testing.assert_array_equal(np.asarray(t), a)
    assert ember.from_numpy(a).data_ptr() == a.ctypes.data


def test_read_only_arrays_are_copied():
    a = np.arange(4.0)
    a.flags.writeable = False
    try:
        t = ember.from_dlpack(a)
    except BufferError:
        pytest.skip("this NumPy refuses to export read-only arrays")
    assert t.data_ptr() != a.ctypes.data and t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_from_dlpack_options_and_errors():
    a = np.ones(3)
    assert ember.from_dlpack(a, copy=True).data_ptr() != a.ctypes.data
    with pytest.raises(TypeError, match="__dlpack__"):
        ember.from_dlpack([1, 2, 3])
    assert ember.as_tensor(a).data_ptr() == a.ctypes.data
    assert ember.as_tensor([1, 2]).tolist() == [1, 2]
    assert ember.as_tensor(a, dtype=ember.float32).dtype is ember.float32


def test_frombuffer_shares_a_bytearray_both_ways():
    buf = bytearray(struct.pack("<4f", 1.0, 2.0, 3.0, 4.0))
    t = ember.frombuffer(buf, dtype=ember.float32)
    assert t.shape == (4,) and t.tolist() == [1.0, 2.0, 3.0, 4.0]
    t[1] = 20.0
    assert struct.unpack_from("<f", buf, 4)[0] == 20.0
    struct.pack_into("<f", buf, 12, -4.0)
    assert t[3].item() == -4.0
    # count and offset pick a run of elements; the view keeps its own start.
    middle = ember.frombuffer(buf, dtype=ember.float32, count=2, offset=4)
    assert middle.tolist() == [20.0, 3.0]


@pytest.mark.parametrize("dtype, fmt", [(ember.int64, "<q"), (ember.int32, "<i"), (ember.float64, "<d"),
                                        (ember.float16, "<e"), (ember.uint8, "<B")])
def test_frombuffer_reads_each_dtype_as_its_bytes(dtype, fmt):
    values = [3, 1, 4, 1, 5]
    buf = bytearray(struct.pack("<" + fmt[1] * len(values), *values))
    assert ember.frombuffer(buf, dtype=dtype).tolist() == values


def test_frombuffer_bfloat16_is_the_top_half_of_float32():
    floats = [1.5, -2.0, 0.15625]  # exact in bfloat16
    halves = [struct.unpack("<I", struct.pack("<f", f))[0] >> 16 for f in floats]
    buf = bytearray(struct.pack("<3H", *halves))
    assert ember.frombuffer(buf, dtype=ember.bfloat16).float().tolist() == floats


def test_frombuffer_keeps_the_buffer_exported_until_the_last_view_goes():
    buf = bytearray(16)
    before = _foreign_count()
    t = ember.frombuffer(buf, dtype=ember.int32)
    view = t[1:3]
    del t
    gc.collect()
    with pytest.raises(BufferError):  # an exported bytearray cannot be resized
        buf.extend(b"x")
    view.fill_(7)
    assert buf[4:12] == struct.pack("<2i", 7, 7)
    del view
    gc.collect()
    buf.extend(b"x")
    assert _foreign_count() == before


def test_frombuffer_over_an_mmap_and_a_numpy_array():
    region = mmap.mmap(-1, 32)
    t = ember.frombuffer(region, dtype=ember.float64)
    t.fill_(2.5)
    assert struct.unpack_from("<d", region, 24)[0] == 2.5
    a = np.arange(6, dtype=np.int32)
    assert ember.frombuffer(a, dtype=ember.int32).data_ptr() == a.ctypes.data
    del t
    gc.collect()
    region.close()  # raises BufferError while a tensor still views it


def test_frombuffer_copies_read_only_buffers():
    data = struct.pack("<2f", 1.0, 2.0)
    t = ember.frombuffer(data, dtype=ember.float32, requires_grad=True)
    assert t.requires_grad and t.tolist() == [1.0, 2.0]
    with ember.no_grad():
        t.mul_(3)
    assert struct.unpack("<2f", data) == (1.0, 2.0)


def test_frombuffer_errors_name_the_sizes():
    buf = bytearray(10)
    with pytest.raises(TypeError, match="buffer protocol"):
        ember.frombuffer([1, 2], dtype=ember.float32)
    with pytest.raises(ValueError, match="10 bytes after offset 0 are not a whole number of float32"):
        ember.frombuffer(buf, dtype=ember.float32)
    with pytest.raises(ValueError, match="3 float32 elements of 4 bytes do not fit in the buffer's 10 bytes"):
        ember.frombuffer(buf, dtype=ember.float32, count=3)
    with pytest.raises(ValueError, match="do not fit"):
        ember.frombuffer(buf, dtype=ember.float64, count=2**62)
    with pytest.raises(ValueError, match="offset 10 is outside the buffer's 10 bytes"):
        ember.frombuffer(buf, dtype=ember.uint8, offset=10)
    with pytest.raises(ValueError, match="offset -1"):
        ember.frombuffer(buf, dtype=ember.uint8, offset=-1)
    with pytest.raises(ValueError, match="count must be positive or -1"):
        ember.frombuffer(buf, dtype=ember.uint8, count=0)
    with pytest.raises(ValueError, match="no bytes after offset"):
        ember.frombuffer(bytearray(), dtype=ember.uint8)
    with pytest.raises(ValueError, match="misaligned for float32"):
        ember.frombuffer(bytearray(12), dtype=ember.float32, count=2, offset=2)
    # A failed call exports nothing: the bytearray can still be resized.
    buf.extend(b"x")


def test_torch_interchange_if_available():
    torch = pytest.importorskip("torch")
    t = ember.arange(6.0).reshape(2, 3)
    pt = torch.from_dlpack(t)
    assert pt.data_ptr() == t.data_ptr()
    back = ember.from_dlpack(torch.arange(4.0))
    assert back.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_torch_imports_after_ember_in_one_process():
    # ember, imported first, must not leave PyTorch with older copies of the CUDA libraries both load
    # (python/ember/_cuda_libraries.py). A fresh interpreter: this one may have imported torch already.
    pytest.importorskip("torch")
    code = ("import ember, torch\n"
            "x = torch.arange(4.0)\n"
            "ember.from_dlpack(x).add_(1)\n"
            "assert x.tolist() == [1.0, 2.0, 3.0, 4.0], x\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_buffers_without_strides_are_read_row_major():
    # ctypes arrays export no strides: their memory is C-contiguous.
    import ctypes

    grid = ((ctypes.c_double * 3) * 2)()
    for i in range(2):
        for j in range(3):
            grid[i][j] = 10 * i + j
    assert ember.tensor(grid).tolist() == [[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]]
    assert ember.tensor(((ctypes.c_int32 * 2) * 1)(*[(ctypes.c_int32 * 2)(7, 8)])).tolist() == [[7, 8]]


def _crafted_capsule(shape, data=True, strides=None, type_code=2, on_delete=None):
    """A DLPack capsule over 16 float32s built by hand, as a foreign producer would; its deleter (when
    on_delete is given) calls on_delete. Returns the capsule and what must outlive it."""
    import ctypes

    class DLDevice(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int), ("dtype", DLDataType),
                    ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                    ("byte_offset", ctypes.c_uint64)]

    class DLManagedTensor(ctypes.Structure):
        _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

    values = (ctypes.c_float * 16)(*range(16))
    dims = (ctypes.c_int64 * len(shape))(*shape)
    steps = (ctypes.c_int64 * len(shape))(*strides) if strides else None
    deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: on_delete()) if on_delete else None
    managed = DLManagedTensor()
    managed.dl_tensor.data = ctypes.addressof(values) if data else None
    managed.dl_tensor.device = DLDevice(1, 0)
    managed.dl_tensor.ndim = len(shape)
    managed.dl_tensor.dtype = DLDataType(type_code, 32, 1)
    managed.dl_tensor.shape = dims
    managed.dl_tensor.strides = steps
    managed.deleter = ctypes.cast(deleter, ctypes.c_void_p) if deleter else None
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype, new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new_capsule(ctypes.addressof(managed), b"dltensor", None), (values, dims, steps, deleter, managed)


@pytest.mark.parametrize(
    "fields,error,words",
    [
        (dict(shape=[4], data=False), ValueError, ["4 elements", "null data pointer"]),
        (dict(shape=[3, -2]), ember.ShapeError, ["dim 1 has size -2"]),
        (dict(shape=[2**40, 2**40]), ember.ShapeError, ["more elements than an int64"]),
        (dict(shape=[3, 4], strides=[2**62, 1]), ember.ShapeError, ["reaches past"]),
        (dict(shape=[2, 4], strides=[2**62, 1]), ember.ShapeError, ["spans more bytes"]),
        (dict(shape=[4], type_code=5), TypeError, ["type code 5"]),
    ],
)
def test_a_refused_dlpack_capsule_says_why_and_returns_the_memory(fields, error, words):
    deleted = []
    capsule, keep = _crafted_capsule(**fields, on_delete=lambda: deleted.append(1))
    with pytest.raises(error) as info:
        ember.from_dlpack(capsule)
    for word in words:
        assert word in str(info.value)
    assert deleted == [1]  # the capsule is consumed ("used_dltensor"): ember called the deleter
    del keep


def test_a_crafted_capsule_is_imported_and_released_once():
    deleted = []
    capsule, keep = _crafted_capsule([2, 2], strides=[4, 1], on_delete=lambda: deleted.append(1))
    t = ember.from_dlpack(capsule)
    assert t.tolist() == [[0.0, 1.0], [4.0, 5.0]] and deleted == []
    empty = ember.from_dlpack(_crafted_capsule([0], data=False)[0])
    assert empty.shape == (0,)
    del t
    assert deleted == [1]
    del keep


def test_mapped_file_refuses_a_size_past_the_files_end(tmp_path):
    # Mapping past the end would raise SIGBUS on first touch.
    path = tmp_path / "short"
    path.write_bytes(b"abcd")
    with open(path, "r+b") as f:
        with pytest.raises(ValueError, match="holds 4 bytes, fewer than the 1048576"):
            ember._ember._MappedFile(f.fileno(), 1 << 20)
        assert bytes(memoryview(ember._ember._MappedFile(f.fileno(), 4))) == b"abcd"


def test_tensor_copies_an_array_of_another_library():
    # A torch.Tensor has __float__ too: it went down the number path and was refused.
    torch = pytest.importorskip("torch")
    source = torch.arange(6.0).reshape(2, 3)
    t = ember.tensor(source)
    assert t.tolist() == source.tolist() and t.data_ptr() != source.data_ptr()
    assert ember.tensor(torch.tensor(2.5)).item() == 2.5

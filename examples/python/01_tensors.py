"""01_tensors: what an ember Tensor is, from Python (examples/01_tensors.cpp's twin). Creation and
seeded random numbers; dtypes and PyTorch's promotion rules (a 0-dim tensor or a Python number does
not widen a tensor); views, which share storage and differ only in shape, strides and offset, and
NumPy arrays that view the same memory; broadcasting, whose strides of 0 let a (3, 1) and a (4)
tensor act as (3, 4) without copying; and printing. Each fact is checked, so the script fails if
the library stops behaving as described.

Read next: python/ember/bind_tensor.cpp (the Tensor class: metadata, strides, item, printing),
python/ember/bind_ops.cpp (the ops as methods, functions and operators: each a call into tensor/ops.h),
python/ember/bind_factory.cpp (ember.tensor, zeros, randn, ...: Python values into tensors),
python/ember/bind_interop.cpp (the buffer protocol and DLPack: NumPy sees the same memory), then the
C++ they call: tensor/tensor.h (TensorImpl: storage + offset + shape + strides + dtype), tensor/view.cpp
(view, transpose, expand), tensor/shape.cpp (broadcast_shapes), tensor/dtype.cpp (promote_types),
tensor/print.cpp (PyTorch's print format).

    PYTHONPATH=build/python python3 examples/python/01_tensors.py
"""

import argparse

import numpy as np

import ember
from ladder_checks import run_checked


def storage_address(t):
    """Where t's storage begins (ember has no Tensor.untyped_storage(): its data pointer less its offset)."""
    return t.data_ptr() - t.storage_offset() * t.element_size()


def same_storage(a, b):
    return storage_address(a) == storage_address(b)


def creation(checks):
    print("\n== creation")
    a = ember.arange(6, dtype=ember.float32).reshape(2, 3)
    print(f"arange(6, dtype=float32).reshape(2, 3) = {a}")
    print(f"full((2, 2), 7.0) = {ember.full((2, 2), 7.0)}")
    print(f"tensor([1, 2, 3], dtype=int32) = {ember.tensor([1, 2, 3], dtype=ember.int32)}")
    checks.expect(ember.zeros(2, 3).dtype == ember.float32 and ember.arange(3).dtype == ember.int64,
                  "factories default to float32, arange over whole numbers to int64 (as PyTorch)")
    # Random numbers come from a counter-based generator (Philox): a seed and a position name them.
    g1, g2 = ember.Generator(42), ember.Generator(42)
    r1, r2 = ember.randn(4, generator=g1), ember.randn(4, generator=g2)
    print(f"randn(4) with seed 42 = {r1}")
    checks.expect(ember.equal(r1, r2), "two generators with the same seed draw the same numbers")
    checks.expect(not ember.equal(r1, ember.randn(4, generator=g1)), "a generator moves on after each draw")


def dtypes(checks):
    print("\n== dtypes and promotion")
    i = ember.arange(3)  # int64
    f = ember.ones(3)  # float32
    checks.expect((i + f).dtype == ember.float32, "int64 + float32 tensor -> float32 (a floating category wins)")
    checks.expect((i + 0.5).dtype == ember.float32, "int64 + a Python float -> float32, the default float, not float64")
    checks.expect((f + ember.ones(3, dtype=ember.float64)).dtype == ember.float64,
                  "float32 + float64 tensor -> float64")
    h = ember.ones(3, dtype=ember.float16)
    checks.expect((h + ember.scalar_tensor(2.0, dtype=ember.float64)).dtype == ember.float16,
                  "float16 + a 0-dim float64 tensor -> float16: a 0-dim tensor does not widen")
    checks.expect(ember.result_type(h, ember.ones(2, dtype=ember.bfloat16)) == ember.float32,
                  "float16 with bfloat16 -> float32")
    # float16 keeps 11 significant bits: 1/3 is stored as the nearest of them, which NumPy's float16 agrees on.
    third = ember.full((1,), 1 / 3, dtype=ember.float16).item()
    print(f"1/3 in float16 = {third}, in float32 = {ember.full((1,), 1 / 3).item()}")
    checks.expect(abs(third - 1 / 3) < 1 / 2048 and third != 1 / 3 and third == float(np.float16(1 / 3)),
                  "float16 rounds 1/3 to within half a unit of its 11th bit, as NumPy's float16 does")


def views(checks):
    print("\n== views share storage")
    a = ember.arange(6, dtype=ember.float32).reshape(2, 3)
    t = a.transpose(0, 1)
    print(f"a.stride() = {a.stride()}, a.transpose(0, 1).stride() = {t.stride()}")
    checks.expect(same_storage(a, t) and t.shape == (3, 2) and t.stride() == (1, 3),
                  "transpose swaps shape and strides over the same storage, copying nothing")
    checks.expect(not t.is_contiguous() and not same_storage(t, t.contiguous()),
                  "a transposed tensor is not contiguous; contiguous() copies it into new storage")
    row = a.select(0, 1)  # the second row: offset 3, stride 1
    row.fill_(100)
    print(f"after a.select(0, 1).fill_(100): a = {a}")
    checks.expect(a.tolist() == [[0, 1, 2], [100, 100, 100]], "writing through a view writes the base")
    every_other = a[:, 0:3:2]
    checks.expect(same_storage(a, every_other) and every_other.stride() == (3, 2),
                  "a slice with a step is a view with a wider stride")
    checks.expect_raises(ember.ShapeError, lambda: t.view(6),
                         "view() refuses strides it cannot express without a copy (ShapeError, a ValueError)",
                         "t.view(6) refused")
    checks.expect(not same_storage(t, t.reshape(6)), "reshape() copies where view() cannot")
    # NumPy views a CPU tensor's memory through the buffer protocol: no copy either way.
    array = np.asarray(a)
    array[0, 0] = -1
    checks.expect(a[0, 0].item() == -1 and array.strides == tuple(4 * s for s in a.stride()),
                  "np.asarray(a) is a view of a's memory, with a's strides in bytes: a write through it is seen by a")
    # The version counter is how autograd notices an in-place write to a tensor it saved.
    before = a._version
    a.add_(1.0)
    checks.expect(a._version == before + 1 and row._version == a._version,
                  "an in-place op bumps the storage's version, seen by every view")


def broadcasting(checks):
    print("\n== broadcasting")
    # Shapes are aligned from the right; a dim of 1 (or a missing one) stretches to the other's size.
    col = ember.arange(3, dtype=ember.float32).reshape(3, 1)
    row = ember.arange(4, dtype=ember.float32) * 10.0
    total = col + row  # (3, 1) + (4) -> (3, 4)
    print(f"(3, 1) + (4) = {total}")
    checks.expect(total.shape == (3, 4) and np.array_equal(np.asarray(total), np.asarray(col) + np.asarray(row)),
                  "(3, 1) + (4) -> (3, 4) with out[i][j] = col[i] + row[j], as NumPy broadcasts")
    stretched = col.expand(3, 4)
    checks.expect(same_storage(col, stretched) and stretched.stride() == (1, 0),
                  "expand is a view whose stretched dim has stride 0: nothing is copied")
    checks.expect(ember.ones(3, 4).sum_to_size(3, 1).tolist() == [[4], [4], [4]],
                  "sum_to_size undoes broadcasting (what the vjp of a broadcasting op does to a gradient)")
    checks.expect_raises(ember.ShapeError, lambda: ember.ones(3) + ember.ones(4),
                         "sizes that differ and are not 1 do not broadcast (ShapeError)", "ones(3) + ones(4) refused")


def printing(checks):
    print("\n== printing")
    text = str(ember.arange(2000, dtype=ember.float32))
    print(f"arange(2000.) prints as {text}")
    checks.expect("..." in text, "tensors over 1000 elements print summarised, as PyTorch's")
    x = ember.ones(2, requires_grad=True)
    print(f"x * 2 with x requiring grad = {x * 2}")
    checks.expect("grad_fn=<mul>" in repr(x * 2), "a result of a recorded op names its grad_fn")


def main():
    argparse.ArgumentParser(description="Step 1 of the example ladder: tensors, dtypes, views and broadcasting, "
                            "each fact checked.").parse_args()

    def body(checks):
        for part in (creation, dtypes, views, broadcasting, printing):
            part(checks)

    run_checked("01_tensors", body)


if __name__ == "__main__":
    main()

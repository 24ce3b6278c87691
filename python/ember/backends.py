"""The process-wide switches of the CUDA backend, under ``torch.backends``' names:

    ember.backends.cuda.matmul.allow_tf32 = True   # float32 matmul on TF32 tensor cores
    ember.backends.cudnn.allow_tf32 = True         # float32 convolutions on TF32 tensor cores
    ember.backends.cudnn.benchmark = True          # time cuDNN's algorithms once per problem

Every build holds them (a CPU-only one too); they change nothing on the CPU. All three are off at
the start. (PyTorch starts with cudnn.allow_tf32 on; ember keeps float32 convolutions exact until
asked.) ``ember.set_float32_matmul_precision`` sets the matmul one as PyTorch's does.

A name PyTorch has and ember does not is an AttributeError rather than a setting that does nothing:
``cudnn.deterministic`` is one, as ember's deterministic mode (``ember.use_deterministic_algorithms``)
covers every op, cuDNN's included."""

from . import _ember

__all__ = ["cuda", "cudnn"]


class _Switches:
    """An object whose attributes are switches of the C++ backend: each read and write goes there, and
    an attribute it does not have cannot be set."""

    __slots__ = ()
    _missing = {}

    def __setattr__(self, name, value):
        if not hasattr(type(self), name):
            why = self._missing.get(name, "")
            raise AttributeError(f"{self._name} has no switch {name!r}{': ' + why if why else ''}")
        object.__setattr__(self, name, value)

    def __repr__(self):
        return f"<{self._name}>"


def _switch(getter, setter, doc):
    return property(lambda self: getter(), lambda self, on: setter(bool(on)), doc=doc)


class _Matmul(_Switches):
    __slots__ = ()
    _name = "ember.backends.cuda.matmul"
    allow_tf32 = _switch(_ember._matmul_allow_tf32, _ember._set_matmul_allow_tf32,
                         "Whether float32 matmul, bmm and linear may run on TF32 tensor cores (10-bit mantissa "
                         "inputs, float32 accumulation).")


class _Cuda(_Switches):
    __slots__ = ()
    _name = "ember.backends.cuda"
    matmul = _Matmul()

    @staticmethod
    def is_built():
        """Whether this ember has the CUDA backend (whether or not a GPU is present)."""
        from . import _build_config

        return _build_config.CUDA_BACKEND


class _Cudnn(_Switches):
    __slots__ = ()
    _name = "ember.backends.cudnn"
    _missing = {
        "deterministic": "ember's deterministic mode covers every op: ember.use_deterministic_algorithms(True)",
        "enabled": "ember's CUDA convolutions run on cuDNN whenever ember was built with it",
    }
    allow_tf32 = _switch(_ember._conv_allow_tf32, _ember._set_conv_allow_tf32,
                         "Whether float32 convolutions may run on TF32 tensor cores.")
    benchmark = _switch(_ember._cudnn_benchmark, _ember._set_cudnn_benchmark,
                        "Whether the first convolution of each problem times cuDNN's algorithms and keeps the "
                        "fastest (ignored in deterministic mode); off: cuDNN's heuristics choose.")


cuda = _Cuda()
cudnn = _Cudnn()

"""``torch.nn.parallel``'s DistributedDataParallel over ember's C++ one (dist/distributed_data_parallel.h)."""

from .. import _ember
from .. import distributed as _dist
from .modules import Module, _cpp_handle_of

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel(Module):
    """Data-parallel training of ``module`` over a process group, as PyTorch's DDP: at construction
    rank 0's parameters and buffers are broadcast; gradients live in flat buckets (each ``.grad`` a view
    into one), filled in reverse registration order and averaged across ranks on a communication
    thread while backward goes on; when backward ends every bucket has been waited for, so the
    optimizer step sees averaged gradients. Buffers are broadcast from rank 0 before each forward.

    A built-in module's forward runs in C++ under the wrapper; a Python module is mirrored by a C++
    stand-in (same names, same tensors) whose forward calls back, so any forward signature works
    (the first tensor of the output is what the wrapper sees). Its state dict is the module's under
    "module.". Build the optimizer from the module's parameters after wrapping."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True, process_group=None,
                 bucket_cap_mb=25.0, find_unused_parameters=False, check_reduction=False, gradient_as_bucket_view=True,
                 static_graph=False, *, first_bucket_mb=1.0, use_ring=None):
        super().__init__()
        group = _dist._group(process_group)
        cpp_module, bridges = _cpp_handle_of(module)
        self.module = module
        self.__dict__["_bridges"] = bridges  # the C++ stand-ins of Python modules: alive while the wrapper is
        self.__dict__["_cpp"] = _ember._distributed_data_parallel(
            cpp_module, group, float(bucket_cap_mb), float(first_bucket_mb), bool(find_unused_parameters),
            bool(broadcast_buffers), use_ring)
        self.__dict__["process_group"] = group

    def forward(self, *args, **kwargs):
        """The module's forward under the wrapper (buffers broadcast first, gradients averaged in backward)."""
        return _dist._call_through(self._cpp, self.module, args, kwargs)

    def no_sync(self):
        """A context manager for gradient accumulation: backwards inside only accumulate; the first
        backward after it averages the sum."""
        return _dist._guard(lambda: _ember._ddp_no_sync(self._cpp))

    def buckets(self):
        """(parameter names, elements, dtype) of each gradient bucket, in launch order."""
        return _ember._ddp_buckets(self._cpp)

    def extra_repr(self):
        """The world size and bucket count."""
        return f"world_size={self.process_group.size()}, buckets={len(self.buckets())}"

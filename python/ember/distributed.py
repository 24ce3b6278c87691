"""Distributed training (``torch.distributed``) over ember's C++ process groups (dist/*.h): Gloo for CPU
tensors, NCCL for CUDA tensors.

``init_process_group()`` reads the launcher's variables (torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, and the store's port from EMBER_STORE_PORT or MASTER_PORT + 1; Open
MPI's and Slurm's too), so ``torchrun --nproc-per-node 2 script.py`` (or ember's ``tools/launch.py``)
starts a job. Every collective is bounded by the group's timeout (10 minutes unless ``timeout=`` says)
and raises ``ember.DistributedError`` naming the rank, the operation and the peers that did not answer.

Data parallelism: ``ember.nn.parallel.DistributedDataParallel`` (gradients averaged during backward),
``ZeroOptimizer`` (ZeRO stages 1-3: optimizer state, gradients and parameters sharded) and
``DataParallel`` (one interface over all four strategies, "ddp", "zero1", "zero2", "zero3" = FSDP).
"""

import contextlib
import datetime
import os

from . import _ember
from ._ember import Tensor
from .nn.modules import Module, _CppModule, _cpp_handle_of, _route_through_bridges
from .optim import _spec_of_optimizer, _wrap_cpp_optimizer

__all__ = [
    "DataParallel",
    "ReduceOp",
    "ZeroOptimizer",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "get_backend",
    "get_local_rank",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "is_available",
    "is_initialized",
    "recv",
    "reduce_scatter_tensor",
    "send",
]


class ReduceOp:
    """How a collective combines the ranks' tensors (AVG: the sum divided by the world size)."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"


_default_group = None


def _seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _op(op):
    if isinstance(op, str) and op.lower() in ("sum", "avg", "max", "min"):
        return op.lower()
    raise ValueError(f"unknown reduce op {op!r}: use ember.distributed.ReduceOp.SUM, AVG, MAX or MIN")


def is_available():
    """Whether distributed training is available (ember's dist/ is always built)."""
    return True


def is_initialized():
    """Whether init_process_group made the default group."""
    return _default_group is not None


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None, *, master_addr="", store_port=None, debug=None):
    """Makes the default process group. ``backend``: "gloo" (CPU tensors, the default) or "nccl" (CUDA
    tensors); ``init_method``: "env://" (the launcher's variables, the default), "tcp://host:port" or
    "file:///path"; ``rank`` and ``world_size`` override the environment; ``timeout`` (a timedelta or
    seconds) bounds the rendezvous and every collective. Returns the group."""
    global _default_group
    if _default_group is not None:
        raise _ember.StateError("init_process_group: the default process group is already initialized")
    if store is not None:
        raise NotImplementedError("init_process_group: store= is not supported; use init_method")
    # -1 (PyTorch's default) or None: from the environment; any other value must be a rank or a count.
    for name, value in (("world_size", world_size), ("rank", rank)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"init_process_group: {name} must be an int, got {value!r}")
    if world_size is not None and world_size != -1 and world_size < 1:
        raise ValueError(f"init_process_group: world_size must be at least 1 (or -1: from the environment), got {world_size}")
    if rank is not None and rank != -1 and rank < 0:
        raise ValueError(f"init_process_group: rank must be at least 0 (or -1: from the environment), got {rank}")
    if backend is None:
        backend = "gloo"
    backend = str(backend).lower()
    if backend == "cpu:gloo,cuda:nccl":
        backend = "nccl" if _ember._cuda_device_count() else "gloo"
    seconds = _seconds(timeout)
    _default_group = _ember._init_process_group(
        backend, init_method or "env://", None if rank is None or rank < 0 else rank,
        None if world_size is None or world_size < 0 else world_size, seconds if seconds is not None else 600.0,
        master_addr, store_port, debug)
    return _default_group


def destroy_process_group(group=None):
    """Ends the default group (its store and connections close once nothing uses them)."""
    global _default_group
    if group is None or group is _default_group:
        _default_group = None


def _group(group):
    g = group if group is not None else _default_group
    if g is None:
        raise _ember.StateError("the default process group is not initialized: call ember.distributed.init_process_group()")
    return g


def get_rank(group=None):
    """This process's rank in the group."""
    return _group(group).rank()


def get_world_size(group=None):
    """The number of ranks in the group."""
    return _group(group).size()


def get_local_rank():
    """This process's rank on its node (torchrun's LOCAL_RANK; 0 when unset)."""
    text = os.environ.get("LOCAL_RANK", "0")
    if not text.isdigit():
        raise ValueError(f"get_local_rank: LOCAL_RANK={text!r} is not a decimal integer")
    return int(text)


def get_backend(group=None):
    """'gloo' or 'nccl'."""
    return _group(group).backend()


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False, timeout=None):
    """Reduces tensor over the ranks in place; every rank gets the result. With async_op, returns a
    work handle whose wait() finishes it."""
    return _group(group).all_reduce(tensor, _op(op), async_op, _seconds(timeout))


def broadcast(tensor, src, group=None, async_op=False, timeout=None):
    """Copies rank src's tensor into tensor on every rank."""
    return _group(group).broadcast(tensor, src, async_op, _seconds(timeout))


def all_gather(tensor_list, tensor, group=None, async_op=False, timeout=None):
    """Gathers rank r's tensor into tensor_list[r] on every rank."""
    return _group(group).all_gather(list(tensor_list), tensor, async_op, _seconds(timeout))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False, timeout=None):
    """Gathers every rank's input into output (world_size x its elements, rank order)."""
    return _group(group).all_gather_into_tensor(output_tensor, input_tensor, async_op, _seconds(timeout))


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False, timeout=None):
    """Reduces input over the ranks; rank r keeps the r-th slice of the result in output."""
    return _group(group).reduce_scatter_tensor(output, input, _op(op), async_op, _seconds(timeout))


def send(tensor, dst, group=None, tag=0, timeout=None):
    """Sends tensor to rank dst."""
    return _group(group).send(tensor, dst, tag, False, _seconds(timeout))


def recv(tensor, src, group=None, tag=0, timeout=None):
    """Receives into tensor from rank src."""
    return _group(group).recv(tensor, src, tag, False, _seconds(timeout))


def barrier(group=None, async_op=False, device_ids=None, timeout=None):
    """Returns once every rank reached its barrier."""
    return _group(group).barrier(async_op, _seconds(timeout))


# ---- ZeRO and one interface over the strategies


@contextlib.contextmanager
def _guard(make):
    guard = make()
    try:
        yield
    finally:
        guard.exit()


class _SteppedInCpp:
    """What ZeroOptimizer and DataParallel share: their C++ object (``self._cpp``) steps, clears, clips
    and gathers over the process group."""

    def step(self, closure=None):
        """Steps with the averaged gradients (then gathers the updated parameters where they are
        sharded); returns closure's loss when one is given."""
        loss = closure() if closure is not None else None
        self._cpp.step()
        return loss

    def zero_grad(self, set_to_none=True):
        """Sets the gradients to None."""
        self._cpp.zero_grad()

    def clip_grad_norm_(self, max_norm):
        """Clips every rank's gradients together to a 2-norm of max_norm; returns the global norm before."""
        return self._cpp.clip_grad_norm_(float(max_norm))

    def no_sync(self):
        """A context manager for gradient accumulation: backwards inside keep their gradients for the next."""
        return _guard(self._cpp.no_sync)

    def gathered(self):
        """A context manager inside which every parameter is whole (ZeRO-3), to save or compare them."""
        return _guard(self._cpp.gathered)

    def units(self):
        """The ZeRO partition's units (parameters, elements, dtype, whether they stay whole); None under DDP."""
        return self._cpp.units()

    def memory(self):
        """Bytes this rank holds under ZeRO for parameters, gradients and offloaded shards; None under DDP."""
        return self._cpp.memory()


class ZeroOptimizer(_SteppedInCpp):
    """An ember optimizer under ZeRO (dist/zero_optimizer.h): ``module``'s parameters partitioned over the
    group and ``optimizer_class`` built over this rank's pieces only, so its state is divided by the
    number of ranks. ``stage`` 2 also shards the gradients, 3 the parameters too (gathered around each
    module's forward and backward: FSDP). The loop stays plain::

        zero = ember.distributed.ZeroOptimizer(model, ember.optim.AdamW, stage=2, lr=1e-3)
        loss_fn(model(x), y).backward(); zero.step(); zero.zero_grad()

    ``zero_options`` takes DeepSpeed's zero_optimization knobs (reduce_bucket_size, overlap_comm, ...).
    Build it after the model is on its device; ``optimizer`` is the inner optimizer (for a scheduler)."""

    def __init__(self, module, optimizer_class, stage=1, process_group=None, zero_options=None, **optimizer_kwargs):
        group = _group(process_group)
        kind, options = _spec_of_optimizer(optimizer_class, optimizer_kwargs)
        cpp_module, bridges = _cpp_handle_of(module)
        zero = dict(zero_options or {})
        zero["stage"] = stage
        self.module = module
        self._bridges = bridges  # the C++ stand-ins of Python modules: alive while this is
        self._cpp_module = cpp_module
        self._cpp = _ember._ZeroOptimizer(cpp_module, group, kind, options, zero)
        _route_through_bridges(bridges)
        self.optimizer = _wrap_cpp_optimizer(self._cpp.inner(), self)

    @property
    def param_groups(self):
        """The inner optimizer's param groups (over this rank's pieces)."""
        return self.optimizer.param_groups


def _call_through(cpp, module, args, kwargs):
    """Calls a C++ wrapper (DDP, DataParallel) for ``module(*args, **kwargs)``: a built-in module takes
    its tensor directly; a Python module's arguments wait on it while the wrapper calls its stand-in."""
    if isinstance(module, _CppModule):
        if len(args) == 1 and not kwargs and isinstance(args[0], Tensor):
            return cpp(args[0])
        raise TypeError(f"{type(module).__name__} under a data-parallel wrapper takes one tensor")
    module.__dict__["_pending_call"] = (args, kwargs)
    carrier = next((a for a in list(args) + list(kwargs.values()) if isinstance(a, Tensor)), None)
    try:
        cpp(carrier if carrier is not None else _ember.empty(0))
    finally:
        module.__dict__.pop("_pending_call", None)
    return module.__dict__.pop("_pending_output")


class DataParallel(_SteppedInCpp, Module):
    """A model and its optimizer trained data-parallel by one strategy (dist/data_parallel.h):
    "ddp" (everything on every rank, gradients all-reduced), "zero1" (optimizer state sharded),
    "zero2" (and gradients), "zero3" (and parameters: FSDP). The loop is the same for all::

        dp = ember.distributed.DataParallel(model, ember.optim.AdamW, strategy="zero3", lr=1e-3)
        loss_fn(dp(x), y).backward(); dp.clip_grad_norm_(1.0); dp.step(); dp.zero_grad()

    Its state dict is the model's under "module.", as DistributedDataParallel's (under ZeRO-3, read
    it inside ``gathered()``)."""

    def __init__(self, module, optimizer_class, strategy="ddp", process_group=None, bucket_cap_mb=25.0,
                 first_bucket_mb=1.0, find_unused_parameters=False, broadcast_buffers=True, zero_options=None,
                 **optimizer_kwargs):
        super().__init__()
        group = _group(process_group)
        kind, options = _spec_of_optimizer(optimizer_class, optimizer_kwargs)
        cpp_module, bridges = _cpp_handle_of(module)
        self.module = module
        self.__dict__["_bridges"] = bridges
        self.__dict__["_cpp"] = _ember._DataParallel(cpp_module, group, kind, options, strategy, float(bucket_cap_mb),
                                                     float(first_bucket_mb), bool(find_unused_parameters),
                                                     bool(broadcast_buffers), dict(zero_options or {}))
        if strategy == "zero3":
            _route_through_bridges([(m, b) for m, b in bridges if m is not module])
        self.__dict__["optimizer"] = _wrap_cpp_optimizer(self._cpp.optimizer(), self)

    def forward(self, *args, **kwargs):
        """The model's forward under the strategy's wrapper."""
        return _call_through(self._cpp, self.module, args, kwargs)

    @property
    def strategy(self):
        """'ddp', 'zero1', 'zero2' or 'zero3'."""
        return self._cpp.strategy()

"""Moving a batch from a DataLoader worker process to the training process without pickling its tensors'
bytes: the worker copies every CPU tensor of the batch into an anonymous shared-memory file (Linux's
memfd), sends the batch's structure with the tensors replaced by their place in that file, and passes
the file's descriptor over the same Unix socket (SCM_RIGHTS). The training process maps the file and
builds tensors over the mapping (``ember.frombuffer``): one copy in all, made by the worker, and the
mapping lives as long as any tensor of the batch uses it.

The files are reused. Writing a batch into a fresh file costs ten times the copy itself (the kernel
zeroes and maps every page: 45 ms against 4.4 ms for a 77 MB batch on the 2-core VM of BENCHMARKS.md),
so each worker keeps a few files, and the training process tells it, with its next task, which files
hold no batch any more (their mapping was dropped with the batch's last tensor).

PyTorch moves tensors between processes much the same way (its "file_descriptor" sharing strategy).
The memfd is not a file under /dev/shm, so the small /dev/shm of a container does not limit it, and the
training process keeps no descriptor open once a file is mapped (ember._MappedFile, not Python's mmap,
which keeps one per mapping)."""

import collections
import collections.abc
import os
import weakref
from multiprocessing import reduction

from .. import _ember
from .._ember import Tensor

# Each tensor starts on a cache line, which also aligns every dtype.
_ALIGNMENT = 64


class _SharedTensor:
    """Where a tensor of the batch lies in the shared file, and what it is."""

    __slots__ = ("offset", "dtype", "shape", "requires_grad")

    def __init__(self, offset, dtype, shape, requires_grad):
        self.offset, self.dtype, self.shape, self.requires_grad = offset, dtype, shape, requires_grad

    def __reduce__(self):
        return (_SharedTensor, (self.offset, self.dtype, self.shape, self.requires_grad))


def map_structure(obj, leaf):
    """``obj`` rebuilt with ``leaf(x)`` in place of each item of its tuples, lists and dicts (the containers
    default_collate builds; namedtuples and dict subclasses keep their type when they can); anything else
    is a leaf too."""
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(map_structure(x, leaf) for x in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_structure(x, leaf) for x in obj)
    if isinstance(obj, collections.abc.Mapping):
        mapped = {k: map_structure(v, leaf) for k, v in obj.items()}
        try:
            return mapped if type(obj) is dict else type(obj)(mapped)
        except TypeError:  # a mapping built otherwise (defaultdict): a plain dict, as default_collate falls back
            return mapped
    return leaf(obj)


def _padded_size(t):
    return -(-t.numel() * t.element_size() // _ALIGNMENT) * _ALIGNMENT


class WorkerFiles:
    """A worker's shared files: at most ``keep`` are kept for reuse (a file is busy from the batch written
    into it until the training process releases it); beyond that, a batch gets a file of its own that the
    worker forgets once sent, so a training loop that keeps every batch costs the worker no descriptors."""

    def __init__(self, keep):
        self.keep = keep
        self.free, self.busy = [], {}  # free: [(fd, size, region)]; busy: {file id: (fd, size, region)}
        self.next_id = 0

    def release(self, ids):
        """Makes the files the training process no longer maps free for the next batches."""
        for i in ids:
            self.free.append(self.busy.pop(i))

    def _take(self, size):
        """(file id or None, fd, region) of a file of at least ``size`` bytes, busy until released."""
        if self.free:
            fd, have, region = self.free.pop(max(range(len(self.free)), key=lambda i: self.free[i][1]))
            if have < size:
                del region  # a larger mapping replaces it
                os.ftruncate(fd, size)
                have, region = size, _ember._MappedFile(fd, size)
        else:
            fd = os.memfd_create("ember-batch", os.MFD_CLOEXEC)
            os.ftruncate(fd, size)
            have, region = size, _ember._MappedFile(fd, size)
            if len(self.busy) >= self.keep:
                return None, fd, region
        file_id = self.next_id
        self.next_id += 1
        self.busy[file_id] = (fd, have, region)
        return file_id, fd, region

    def send(self, conn, batch, destination_pid):
        """Sends ``("batch", structure, size, file id)`` on ``conn``, then the shared file's descriptor when
        the batch's CPU tensors hold any bytes. Tensors elsewhere in the batch (CUDA, or inside other
        objects) are pickled with the structure. What cannot be pickled raises before anything is sent."""
        placed = []  # (tensor, its place), in the order of the structure
        size = 0

        def place(x):
            nonlocal size
            if not (isinstance(x, Tensor) and x.device.type == "cpu"):
                return x
            p = _SharedTensor(size, x.dtype, tuple(x.shape), x.requires_grad and x.is_leaf)
            placed.append((x, p))
            size += _padded_size(x)
            return p

        structure = map_structure(batch, place)
        if size == 0:
            conn.send_bytes(reduction.ForkingPickler.dumps(("batch", structure, 0, None)))
            return
        file_id, fd, region = self._take(size)
        try:
            message = reduction.ForkingPickler.dumps(("batch", structure, size, file_id))
            with _ember_no_grad():
                for t, p in placed:
                    if t.numel():
                        _view(region, p).copy_(t)
        except BaseException:  # nothing was sent: the file is free again
            if file_id is not None:
                self.release([file_id])
            raise
        conn.send_bytes(message)
        reduction.send_handle(conn, fd, destination_pid)
        if file_id is None:
            del region
            os.close(fd)


def _view(region, place):
    count = 1
    for n in place.shape:
        count *= n
    return _ember.frombuffer(region, dtype=place.dtype, count=count, offset=place.offset).view(list(place.shape))


def receive(conn, reply, released):
    """The batch of a reply ``WorkerFiles.send`` made: ``reply`` is what ``conn.recv()`` returned; the
    descriptor, when the reply announces one, is read from ``conn`` next. When the batch's last tensor is
    gone, the file's id is appended to ``released`` (a deque, safe from any thread)."""
    _, structure, size, file_id = reply
    region = None
    if size:
        fd = reduction.recv_handle(conn)
        try:
            region = _ember._MappedFile(fd, size)
        finally:
            os.close(fd)
        if file_id is not None:
            weakref.finalize(region, released.append, file_id)

    def rebuild(x):
        if not isinstance(x, _SharedTensor):
            return x
        if any(n == 0 for n in x.shape):
            t = _ember.empty(list(x.shape), dtype=x.dtype)
        else:
            t = _view(region, x)
        if x.requires_grad:
            t.requires_grad_(True)
        return t

    return map_structure(structure, rebuild)


def discard(conn, reply, released):
    """Closes the descriptor a reply announced and releases its file, for a reply nobody will read (a
    loop left early)."""
    if reply[0] == "batch" and reply[2]:
        os.close(reduction.recv_handle(conn))
        if reply[3] is not None:
            released.append(reply[3])


def _ember_no_grad():
    from ..autograd import no_grad

    return no_grad()

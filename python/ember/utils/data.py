"""Data loading (``torch.utils.data``): ``Dataset`` to subclass, ``TensorDataset``, ``Subset``, the samplers
(sequential, random, batch, distributed) and ``DataLoader``.

``DataLoader`` has two engines. Over ember's built-in data sets (``ember.datasets``: Fashion-MNIST,
CIFAR-10, ImageFolder) it drives ember's C++ DataLoader (data/dataloader.h): batches are gathered,
decoded and augmented on C++ threads (``num_workers``) while Python trains, and arrive as
``(images, labels)``. Over any other data set it runs in Python: indices from the sampler,
``dataset[i]`` for each, ``collate_fn`` (``default_collate`` stacks), on the calling thread or, with
``num_workers > 0``, in that many worker processes as PyTorch runs them (_worker.py: batches come back
through shared memory, in the sampler's order; ``get_worker_info()`` tells a worker which it is).
Both shuffle with ember's seeded permutation of (seed, epoch), so an order is reproducible: the seed
is ``seed=``, or the ``generator``'s, or drawn from ember's default generator when the loader is built
(``ember.manual_seed`` fixes it); each pass over the loader is the next epoch.
"""

import collections.abc
import itertools
import multiprocessing
import warnings

from .. import _ember
from .._ember import Tensor
from ._shared_batch import map_structure
from ._worker import WorkerInfo, WorkerPool, get_worker_info

__all__ = [
    "BatchSampler",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "TensorDataset",
    "WorkerInfo",
    "default_collate",
    "get_worker_info",
    "random_split",
]


# ---- data sets


class Dataset:
    """A map-style data set: subclass it with ``__getitem__(index)`` and ``__len__()``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A data set read as a stream: subclass it with ``__iter__()``; the loader batches what it yields."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class TensorDataset(Dataset):
    """Examples that are rows of tensors of one first dim: ``dataset[i]`` is ``tuple(t[i] for t in
    tensors)``. The loader gathers a whole batch with one index_select per tensor."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0]
        for t in tensors:
            if t.shape[0] != n:
                raise _ember.ShapeError(f"TensorDataset: size mismatch between tensors ({n} and {t.shape[0]} rows)")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]

    def _get_batch(self, indices):
        index = _ember.tensor(indices, dtype=_ember.int64)
        return tuple(t.index_select(0, index.to(t.device)) for t in self.tensors)


class Subset(Dataset):
    """The examples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Data sets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset needs at least one data set")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            idx += len(self)
        if not 0 <= idx < len(self):
            raise IndexError(f"index {idx} out of range for a ConcatDataset of {len(self)}")
        import bisect

        d = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[d - 1] if d else 0
        return self.datasets[d][idx - start]


def random_split(dataset, lengths, generator=None):
    """Disjoint random Subsets of the given lengths (or fractions summing to 1)."""
    n = len(dataset)
    if all(isinstance(x, float) for x in lengths) and abs(sum(lengths) - 1) < 1e-9:
        counts = [int(n * f) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("random_split: the lengths do not add up to the data set's length")
    order = _ember._permutation(n, _seed_of(generator, None), 0)
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[start:start + length]))
        start += length
    return out


# ---- samplers


def _seed_of(generator, seed):
    """A loader's shuffle seed: seed=, the generator's, or one drawn from ember's default generator."""
    if seed is not None:
        return int(seed)
    if generator is not None:
        return int(generator.initial_seed())
    return int(_ember.randint(0, 2**62, (1,)).item())


class Sampler:
    """The base of samplers: ``__iter__`` yields the indices of one epoch."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A seeded permutation each epoch (ember's, as the C++ loader draws); with ``replacement``,
    ``num_samples`` uniform draws."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None, seed=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.seed = _seed_of(generator, seed)
        self.epoch = 0

    @property
    def num_samples(self):
        """Indices per epoch."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def set_epoch(self, epoch):
        """Chooses the epoch whose order the next pass draws."""
        self.epoch = epoch

    def __iter__(self):
        n = len(self.data_source)
        if n == 0:  # nothing to draw from (the permutation's repeats would divide by zero)
            self.epoch += 1
            return iter([])
        if self.replacement:
            gen = _ember.Generator(self.seed + self.epoch)
            order = _ember.randint(0, n, (self.num_samples,), generator=gen).tolist()
        else:
            order = _ember._permutation(n, self.seed, self.epoch)
            reps, rest = divmod(self.num_samples, n)
            order = list(order) * reps + list(order[:rest])
        self.epoch += 1
        return iter(order)

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of batch_size indices from sampler (the last one short unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer, got {batch_size!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class DistributedSampler(Sampler):
    """This rank's share of each epoch (``torch.utils.data.DistributedSampler``): every rank draws the
    same order (a seeded permutation with shuffle), evens it out to a multiple of the world size
    (repeating its first indices, or dropping the tail with drop_last) and takes every
    num_replicas-th index from ``rank`` on; ember's C++ data::distributed_sampler computes it. Call
    ``set_epoch(e)`` before each epoch."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            from .. import distributed

            if not distributed.is_initialized():
                raise RuntimeError("DistributedSampler: give num_replicas and rank, or call "
                                   "ember.distributed.init_process_group first")
            num_replicas = distributed.get_world_size() if num_replicas is None else num_replicas
            rank = distributed.get_rank() if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: invalid rank {rank}, rank should be in [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0

    def _indices(self):
        return _ember._distributed_sampler_indices(len(self.dataset), self.epoch, self.rank, self.num_replicas,
                                                   self.shuffle, self.seed, self.drop_last)

    def __iter__(self):
        return iter(self._indices())

    def __len__(self):
        n = len(self.dataset)
        return n // self.num_replicas if self.drop_last else -(-n // self.num_replicas)

    def set_epoch(self, epoch):
        """Chooses the epoch whose share the next pass yields (the same on every rank)."""
        self.epoch = epoch


# ---- collation


def default_collate(batch):
    """Stacks a list of examples into a batch: tensors are stacked, numbers become a tensor (int64,
    float64, bool), NumPy arrays are stacked as tensors, and tuples, lists, dicts and namedtuples are
    collated field by field; strings stay a list."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _ember.stack(list(batch), 0)
    if type(elem).__module__ == "numpy" and hasattr(elem, "shape"):
        if getattr(elem, "shape", None) == ():
            return default_collate([e.item() for e in batch])
        from .. import as_tensor

        return _ember.stack([as_tensor(e) for e in batch], 0)
    if isinstance(elem, bool):
        return _ember.tensor(batch, dtype=_ember.bool)
    if isinstance(elem, int):
        return _ember.tensor(batch, dtype=_ember.int64)
    if isinstance(elem, float):
        return _ember.tensor(batch, dtype=_ember.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("default_collate: each element in the list of the batch should be of equal size")
        return [default_collate(list(samples)) for samples in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, NumPy arrays, numbers, dicts or lists; "
                    f"found {type(elem).__name__}")


# ---- the loader


class DataLoader:
    """Batches of a data set, epoch by epoch (``torch.utils.data.DataLoader``; see the module's
    description for its two engines). Each ``for batch in loader`` is one epoch.

    ``sampler`` (an iterable of indices, e.g. a DistributedSampler) replaces shuffle; ``batch_sampler``
    yields whole lists of indices. ``num_workers`` prepare ``prefetch_factor`` batches each ahead: C++
    threads over ember's built-in data sets, worker processes over Python data sets (started with
    ``multiprocessing_context``, the default start method when None; each calls ``worker_init_fn(id)``
    once; ``persistent_workers`` keeps them from one epoch to the next; ``timeout`` > 0 bounds the wait
    for a batch). With 0 the Python work runs on the calling thread. ``pin_memory`` hands out batches in
    page-locked memory when a GPU is visible. ``seed`` is ember's addition: the shuffle seed, from which
    each epoch's worker seeds derive too."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", seed=None):
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if isinstance(dataset, IterableDataset) and (shuffle or sampler is not None or batch_sampler is not None):
            # An iterable data set decides its own order, as in PyTorch.
            raise ValueError("DataLoader over an IterableDataset takes no shuffle, sampler or batch_sampler option")
        if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0):
            raise ValueError(f"batch_size should be a positive integer, got {batch_size!r}")
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
            raise ValueError(f"num_workers option should be a non-negative integer, got {num_workers!r}")
        if not isinstance(timeout, (int, float)) or not timeout >= 0:  # NaN too
            raise ValueError(f"timeout option should be non-negative, got {timeout!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if prefetch_factor is not None and (not isinstance(prefetch_factor, int) or prefetch_factor < 1):
            raise ValueError(f"prefetch_factor option should be a positive integer, got {prefetch_factor!r}")
        if isinstance(multiprocessing_context, str) and multiprocessing_context not in multiprocessing.get_all_start_methods():
            raise ValueError(f"multiprocessing_context option should be one of {multiprocessing.get_all_start_methods()}, "
                             f"got {multiprocessing_context!r}")
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor if prefetch_factor is not None else 2
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self._workers = None  # the persistent workers, once started
        self.collate_fn = collate_fn if collate_fn is not None else default_collate
        self.shuffle = bool(shuffle)
        self.seed = _seed_of(generator, seed)
        self.epoch = 0
        self._iterable = isinstance(dataset, IterableDataset)
        cpp_dataset = getattr(dataset, "_cpp_dataset", None)
        self._use_cpp = (cpp_dataset is not None and collate_fn is None and batch_sampler is None and batch_size is not None
                         and (sampler is None or isinstance(sampler, DistributedSampler)))
        self._cpp_loader = None
        # Page-locked batches need a GPU: without one the option is ignored and said so once, as the C++
        # loader does for its own batches.
        self._pin = bool(pin_memory) and not self._use_cpp and _ember._cuda_device_count() > 0
        if pin_memory and not self._use_cpp and not self._pin:
            warnings.warn("DataLoader pin_memory=True ignored: no CUDA device is visible", stacklevel=2)
        if self._iterable:
            self.sampler = None
            self.batch_sampler = None
        elif batch_sampler is not None:
            self.sampler = None
            self.batch_sampler = batch_sampler
        else:
            if sampler is None:
                sampler = (RandomSampler(dataset, seed=self.seed) if self.shuffle else SequentialSampler(dataset))
            self.sampler = sampler
            self.batch_sampler = BatchSampler(sampler, batch_size, drop_last) if batch_size is not None else None
        if self._use_cpp:
            distributed = None
            if isinstance(sampler, DistributedSampler):
                distributed = (sampler.rank, sampler.num_replicas, sampler.shuffle, sampler.seed, sampler.drop_last)
            self._cpp_loader = _ember._DataLoader(cpp_dataset, batch_size, self.shuffle, self.seed, drop_last,
                                                  num_workers, self.prefetch_factor, distributed,
                                                  getattr(dataset, "batch_transform", None), bool(pin_memory))

    def __len__(self):
        if self._cpp_loader is not None:
            return len(self._cpp_loader)
        if self._iterable:
            raise TypeError("a DataLoader over an IterableDataset has no length")
        if self.batch_sampler is None:
            return len(self.sampler)
        return len(self.batch_sampler)

    def set_epoch(self, epoch):
        """Makes the next pass epoch ``epoch`` (its shuffle order and, in the C++ engine, augmentation)."""
        self.epoch = epoch

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        if self._cpp_loader is not None:
            return self._iter_cpp(epoch)
        if isinstance(self.sampler, RandomSampler):
            self.sampler.set_epoch(epoch)
        if self._iterable:
            tasks = itertools.repeat(None)
        else:
            tasks = iter(self.batch_sampler if self.batch_sampler is not None else self.sampler)
        batches = self._iter_workers(tasks, epoch) if self.num_workers else self._iter_here(tasks)
        return map(_pinned, batches) if self._pin else batches

    def _iter_cpp(self, epoch):
        loader = self._cpp_loader
        if isinstance(self.sampler, DistributedSampler):
            epoch = self.sampler.epoch  # as PyTorch: the sampler's set_epoch picks the share
        loader.set_epoch(epoch)
        while True:
            batch = loader.next()
            if batch is None:
                return
            yield batch

    def _fetcher(self):
        return _BatchFetcher(self.dataset, self.collate_fn, self.batch_size, self.drop_last)

    def _iter_here(self, tasks):
        fetch = self._fetcher()
        for task in tasks:
            try:
                batch = fetch(task)
            except StopIteration:  # the end of an IterableDataset's stream
                return
            yield batch

    def _iter_workers(self, tasks, epoch):
        workers = self._workers
        if workers is None or not workers.alive:
            # Each epoch's workers are seeded anew from (seed, epoch): a run is reproducible.
            base_seed = int(_ember.randint(0, 2**62, (1,), generator=_ember.Generator(self.seed + epoch)).item())
            workers = WorkerPool(self, self._fetcher(), base_seed)
            if self.persistent_workers:
                self._workers = workers
        try:
            yield from workers.batches(tasks, self._iterable)
        finally:
            if not self.persistent_workers:
                workers.close()

    def __del__(self):
        if getattr(self, "_workers", None) is not None:
            self._workers.close()


def _pinned(batch):
    """The batch with its CPU tensors copied into page-locked memory (copies to a GPU then run
    asynchronously), as PyTorch's pin_memory does."""
    return map_structure(batch, lambda x: x.pin_memory() if isinstance(x, Tensor) and x.device.type == "cpu" else x)


class _BatchFetcher:
    """What the loader makes of one task, on the calling thread or in a worker: the batch of a list of
    indices (``collate_fn`` over the examples, or the data set's own batch gather), one example when
    batching is off (``batch_size=None``: ``collate_fn`` applies only when one was given), or, from an
    IterableDataset (task None), the next batch of its stream: StopIteration when it is done.
    Picklable, so that workers started by spawn or forkserver get it with their copy of the data set."""

    def __init__(self, dataset, collate_fn, batch_size, drop_last):
        self.dataset, self.collate_fn, self.batch_size, self.drop_last = dataset, collate_fn, batch_size, drop_last
        self.stream = None

    def restart(self):
        """The next stream task starts the IterableDataset's stream over (a new epoch)."""
        self.stream = None

    def __call__(self, task):
        if task is None:
            return self._next_of_stream()
        if self.batch_size is None:
            return self._unbatched(self.dataset[task])
        getter = getattr(self.dataset, "_get_batch", None)
        if getter is not None and self.collate_fn is default_collate:
            return getter(task)
        return self.collate_fn([self.dataset[i] for i in task])

    def _unbatched(self, item):
        """One example as batching-off hands it out: as it is, unless a collate_fn was given."""
        return item if self.collate_fn is default_collate else self.collate_fn(item)

    def _next_of_stream(self):
        if self.stream is None:
            self.stream = iter(self.dataset)
        if self.batch_size is None:
            return self._unbatched(next(self.stream))
        batch = list(itertools.islice(self.stream, self.batch_size))
        if not batch or (self.drop_last and len(batch) < self.batch_size):
            raise StopIteration
        return self.collate_fn(batch)

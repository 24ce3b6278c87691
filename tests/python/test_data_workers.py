"""The DataLoader's worker processes over Python data sets (num_workers > 0): the same batches in the same
order as on the calling thread, really made in other processes and moved through shared memory,
get_worker_info, seeding, worker_init_fn, persistent workers, and the failures: an exception in a
worker, a worker that dies, a timeout. Every wait is bounded by the loader's own checks (and the
python test by Meson's timeout)."""

import collections
import os
import random
import signal
import time

import numpy as np
import pytest

import ember
from ember.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset, get_worker_info
from test_data import Squares


class WhoMadeIt(Dataset):
    """Example i: the pid of the process that made it, the worker id, and a draw of that process's
    ember, Python and NumPy generators."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return {"pid": os.getpid(), "worker": -1 if info is None else info.id,
                "ember": ember.rand(1).item(), "python": random.random(), "numpy": float(np.random.rand())}


class FailsAt(Dataset):
    """Raises, exits the process or stalls at one index."""

    def __init__(self, how, at):
        self.how, self.at = how, at

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == self.at:
            if self.how == "raise":
                raise KeyError(f"no example {i}")
            if self.how == "exit":
                os._exit(3)
            if self.how == "stall":
                time.sleep(30)
        return ember.tensor([float(i)])


class Counting(IterableDataset):
    """0 .. n-1, split between the workers by get_worker_info (each worker takes every k-th item)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


def batches_of(loader):
    return [(x.tolist(), y.tolist()) for x, y in loader]


def open_descriptors():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("shuffle", [False, True])
def test_workers_give_the_batches_of_the_calling_thread_in_order(shuffle):
    data = Squares(23)
    here = DataLoader(data, batch_size=4, shuffle=shuffle, seed=5)
    workers = DataLoader(data, batch_size=4, shuffle=shuffle, seed=5, num_workers=3)
    for _ in range(2):  # two epochs: the shuffle moves on alike
        assert batches_of(workers) == batches_of(here)
    assert len(workers) == 6


def test_batches_are_made_in_the_workers_and_arrive_through_shared_memory():
    loader = DataLoader(WhoMadeIt(), batch_size=2, num_workers=2)
    batches = list(loader)
    pids = [b["pid"].tolist() for b in batches]
    assert all(p != os.getpid() for batch in pids for p in batch)
    assert [b["worker"].tolist() for b in batches] == [[0, 0], [1, 1], [0, 0], [1, 1]]
    assert len({batch[0] for batch in pids}) == 2
    # A batch's tensors view one mapping that outlives the loader: writable, and freed with them.
    before = ember._ember._foreign_memory_count()
    batch = next(iter(DataLoader(Squares(4), batch_size=4, num_workers=1)))
    assert ember._ember._foreign_memory_count() == before + 2
    batch[0].mul_(2)
    assert batch[0][:, 0].tolist() == [0.0, 2.0, 4.0, 6.0] and batch[1].tolist() == [0, 1, 4, 9]
    del batch
    assert ember._ember._foreign_memory_count() == before


class BigSums(Dataset):
    """Example i: the sum of a tensor large enough that ember would split it across threads."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return (ember.ones([1 << 20]) * (i + 1)).sum()


def test_workers_compute_with_ember_after_the_training_process_used_its_threads():
    ember.set_num_threads(2)
    assert (ember.ones([1 << 20]) + 1).sum().item() == 2 << 20  # the pool's threads exist now
    loader = DataLoader(BigSums(), batch_size=2, num_workers=2, timeout=60)  # a hung worker fails, not hangs
    assert [b.tolist() for b in loader] == [[1 << 20, 2 << 20], [3 << 20, 4 << 20]]


def test_get_worker_info_and_the_workers_seeds():
    assert get_worker_info() is None
    first = list(DataLoader(WhoMadeIt(), batch_size=4, num_workers=2, seed=11))
    again = list(DataLoader(WhoMadeIt(), batch_size=4, num_workers=2, seed=11))
    for generator in ("ember", "python", "numpy"):
        draws = [b[generator].tolist() for b in first]
        assert draws == [b[generator].tolist() for b in again]  # reproducible from the loader's seed
        assert draws[0][0] != draws[1][0]  # the two workers draw differently
    other = list(DataLoader(WhoMadeIt(), batch_size=4, num_workers=2, seed=12))
    assert other[0]["ember"].tolist() != first[0]["ember"].tolist()


def test_an_iterable_dataset_split_by_worker_info_yields_each_item_once():
    loader = DataLoader(Counting(10), batch_size=3, num_workers=2)
    items = [x for batch in loader for x in batch.tolist()]
    assert sorted(items) == list(range(10))
    # Worker 0 streams 0, 2, 4, ...; worker 1 streams 1, 3, 5, ...; batches alternate between them.
    assert [b.tolist() for b in DataLoader(Counting(10), batch_size=3, num_workers=2)][:2] == [[0, 2, 4], [1, 3, 5]]
    dropped = [b.tolist() for b in DataLoader(Counting(10), batch_size=3, num_workers=2, drop_last=True)]
    assert dropped == [[0, 2, 4], [1, 3, 5]]  # each worker drops its own short last batch
    unbatched = list(DataLoader(Counting(5), batch_size=None, num_workers=2))
    assert sorted(unbatched) == [0, 1, 2, 3, 4]


def test_worker_init_fn_runs_in_each_worker_before_its_first_batch():
    def init(worker_id):
        random.seed(1000 + worker_id)

    loader = DataLoader(WhoMadeIt(), batch_size=4, num_workers=2, worker_init_fn=init)
    draws = [b["python"].tolist()[0] for b in loader]
    assert draws == [random.Random(1000).random(), random.Random(1001).random()]


def test_persistent_workers_live_across_epochs_and_a_loop_left_early():
    loader = DataLoader(WhoMadeIt(), batch_size=1, num_workers=2, persistent_workers=True)
    first = {b["pid"].item() for b in loader}
    for i, _ in enumerate(loader):  # leaves early: the tasks still in flight are drained next epoch
        if i == 1:
            break
    second = [b["pid"].item() for b in loader]
    assert set(second) == first and len(second) == 8
    fresh = DataLoader(WhoMadeIt(), batch_size=4, num_workers=2)
    assert {b["pid"][0].item() for b in fresh}.isdisjoint({b["pid"][0].item() for b in fresh})


def test_no_descriptor_or_process_is_left_behind():
    import multiprocessing

    list(DataLoader(Squares(16), batch_size=2, num_workers=2))  # the first pool may open lasting files
    before = open_descriptors()
    for _ in range(3):
        list(DataLoader(Squares(16), batch_size=2, num_workers=2))
        for i, _ in enumerate(DataLoader(Squares(16), batch_size=2, num_workers=2)):
            if i == 2:
                break
    assert open_descriptors() == before
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("ember DataLoader")]


Pair = collections.namedtuple("Pair", "left right")  # at module level: the worker pickles it by name


class Mixed(Dataset):
    """Examples of every kind default_collate batches: dicts, namedtuples, strings, bools, dtypes."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"half": ember.full([3], i + 0.5, dtype=ember.bfloat16), "ints": ember.arange(i, i + 2),
                "empty": ember.zeros([0, 2]), "pair": Pair(ember.tensor([i], dtype=ember.uint8), f"n{i}"),
                "flag": i % 2 == 0}


class Calls(Dataset):
    """Example i: how many examples this process made before it: another value each epoch."""

    made = 0

    def __len__(self):
        return 12

    def __getitem__(self, i):
        Calls.made += 1
        return ember.full([4096], float(Calls.made))


def test_a_batch_kept_is_never_overwritten_by_the_files_reuse():
    loader = DataLoader(Calls(), batch_size=2, num_workers=2, persistent_workers=True, prefetch_factor=1)
    kept = [b.clone() for b in loader], list(loader)  # the second epoch's batches stay alive
    third = [b.clone() for b in loader]  # made while they live, in other files
    fourth = [b.clone() for b in loader]  # and again, reusing this epoch's files
    assert [b.tolist() for b in kept[1]] != [b.tolist() for b in kept[0]]
    for before, after in zip(kept[1], third):
        assert before[0, 0].item() == after[0, 0].item() - 6  # each worker made 6 more examples in between
    assert [b[0, 0].item() for b in fourth] == [b[0, 0].item() + 6 for b in third]
    assert all((b == b[:, :1]).all().item() for b in kept[1])  # every row whole, as its example was made


def test_shared_files_are_reused_once_released_and_bounded_when_kept():
    from multiprocessing import Pipe

    from ember.utils import _shared_batch

    worker_end, main_end = Pipe(duplex=True)
    files = _shared_batch.WorkerFiles(keep=2)
    released, kept, fds = collections.deque(), [], []
    for i in range(6):
        files.send(worker_end, (ember.full([1000], float(i)), i), os.getpid())
        batch = _shared_batch.receive(main_end, main_end.recv(), released)
        assert batch[0][999].item() == i and batch[1] == i
        if i in (1, 2):
            fds.append(files.busy[max(files.busy)][0])
        if i >= 3:
            kept.append(batch)  # a loop that keeps its batches: their files stay busy
        del batch
        files.release(list(released))
        released.clear()
        assert len(files.busy) + len(files.free) <= 2
    assert fds[0] == fds[1]  # the file of batch 1 was batch 0's, reused
    assert [b[0][0].item() for b in kept] == [3.0, 4.0, 5.0]  # batch 5 got a file of its own
    del kept
    assert len(released) == 2  # the two kept files; the third was the worker's to forget


def test_batches_of_every_structure_and_dtype_cross_intact():
    here = list(DataLoader(Mixed(), batch_size=2))
    there = list(DataLoader(Mixed(), batch_size=2, num_workers=2))
    for a, b in zip(here, there):
        assert b["half"].dtype is ember.bfloat16 and b["half"].float().tolist() == a["half"].float().tolist()
        assert b["ints"].dtype is ember.int64 and b["ints"].tolist() == a["ints"].tolist()
        assert b["empty"].shape == (2, 0, 2)
        assert isinstance(b["pair"], Pair) and b["pair"].right == a["pair"].right
        assert b["pair"].left.tolist() == a["pair"].left.tolist() and b["flag"].tolist() == a["flag"].tolist()


def test_an_exception_in_a_worker_is_raised_with_its_type_and_traceback():
    loader = DataLoader(FailsAt("raise", 5), batch_size=2, num_workers=2)
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 0") as caught:
        list(loader)
    assert "no example 5" in str(caught.value) and "__getitem__" in str(caught.value)
    # The loader still works for the next epoch (new workers).
    loader.dataset.at = -1
    assert len(list(loader)) == 4


def test_an_exception_of_a_local_type_arrives_as_a_runtime_error_with_its_name():
    class LocalError(Exception):
        pass

    class Raises(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            raise LocalError(f"bad example {i}")

    with pytest.raises(RuntimeError, match="Caught LocalError in DataLoader worker process 0(.|\n)*bad example 0"):
        list(DataLoader(Raises(), batch_size=1, num_workers=1))


def test_a_worker_that_dies_is_a_runtime_error_naming_it():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader worker 1 \(pid \d+\) exited unexpectedly with exit code 3"):
        list(DataLoader(FailsAt("exit", 3), batch_size=2, num_workers=2))
    assert time.monotonic() - start < 20


def test_a_worker_killed_by_a_signal_is_named_with_the_signal():
    loader = DataLoader(FailsAt("stall", 2), batch_size=2, num_workers=2, persistent_workers=True)
    batches = iter(loader)
    next(batches)
    os.kill(loader._workers.processes[1].pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match=r"DataLoader worker 1 \(pid \d+\) was killed by signal SIGKILL"):
        next(batches)


def test_timeout_bounds_the_wait_for_a_batch():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.5 seconds"):
        list(DataLoader(FailsAt("stall", 0), batch_size=2, num_workers=1, timeout=0.5))
    assert time.monotonic() - start < 15  # the stalled worker is terminated, not waited for


def test_spawned_workers_get_a_pickled_copy_of_the_data_set():
    data = TensorDataset(ember.arange(10, dtype=ember.float32), ember.arange(10))
    loader = DataLoader(data, batch_size=4, num_workers=1, multiprocessing_context="spawn")
    assert [y.tolist() for _, y in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_worker_options_are_checked():
    data = Squares(4)
    with pytest.raises(ValueError, match="num_workers option should be a non-negative integer, got -1"):
        DataLoader(data, num_workers=-1)
    with pytest.raises(ValueError, match="timeout option should be non-negative, got -2"):
        DataLoader(data, num_workers=1, timeout=-2)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(data, persistent_workers=True)
    with pytest.raises(ValueError, match="prefetch_factor option should be a positive integer, got 0"):
        DataLoader(data, num_workers=1, prefetch_factor=0)
    with pytest.raises(ValueError, match="multiprocessing_context option should be one of"):
        DataLoader(data, num_workers=1, multiprocessing_context="threads")


def test_a_data_set_spawn_cannot_pickle_fails_at_the_start_and_leaves_no_worker():
    import multiprocessing

    class Local(Dataset):  # a class inside a function: spawn cannot pickle it
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return i

    loader = DataLoader(Local(), batch_size=1, num_workers=2, multiprocessing_context="spawn")
    with pytest.raises(Exception, match="(?i)pickle"):  # AttributeError or PicklingError, by Python version
        list(loader)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("ember DataLoader")]


@pytest.mark.skipif(ember.cuda.is_available(), reason="a GPU is visible: test_cuda.py pins batches")
def test_pin_memory_without_a_gpu_is_ignored_with_a_warning():
    with pytest.warns(UserWarning, match="pin_memory=True ignored: no CUDA device is visible"):
        loader = DataLoader(Squares(4), batch_size=2, num_workers=1, pin_memory=True)
    assert [y.tolist() for _, y in loader] == [[0, 1], [4, 9]]

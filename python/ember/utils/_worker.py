"""The DataLoader's worker processes over a Python data set (``num_workers > 0``), as PyTorch's
DataLoader runs them: each worker holds a copy of the data set, fetches and collates whole batches, and
sends them back through shared memory (_shared_batch.py), so decoding and augmentation written in
Python run beside the training step instead of before it.

The training process sends each worker its own tasks over its own pipe, round-robin, and reads the
replies in the order it sent the tasks: batches arrive in the sampler's order whatever the number of
workers, and each worker has at most ``prefetch_factor`` tasks in flight. A worker that raises sends
the exception back, re-raised in the training process with the worker's traceback; one that dies, or
a reply slower than ``timeout``, is a RuntimeError naming it. Every wait is bounded, so a lost worker
never hangs the loop."""

import collections
import multiprocessing
import os
import pickle
import random
import signal
import sys
import time
import traceback

from .. import _ember
from . import _shared_batch

# How often a wait for a reply checks that its worker still lives (seconds).
_LIVENESS_INTERVAL = 1.0
# How long the end of an epoch waits for a worker to exit before it is terminated (seconds).
_SHUTDOWN_GRACE = 5.0
# Shared files a worker keeps for reuse beyond its tasks in flight: the batch in use and the one before
# it, whose tensors live until the loop's variables are rebound.
_FILES_HELD = 2
# How long a worker whose pipe broke gets to finish exiting, so that its exit code can be told (seconds).
_EXIT_WAIT = 2.0


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: ``id`` (0 to ``num_workers`` - 1),
    ``num_workers``, ``seed`` (this worker's: ember's, Python's and NumPy's generators were seeded with
    it) and ``dataset`` (this worker's copy)."""

    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


_worker_info = None


def get_worker_info():
    """In a DataLoader worker process, its ``WorkerInfo`` (an IterableDataset splits its stream with
    it); None in the training process."""
    return _worker_info


class _RaisedInWorker:
    """An exception a worker caught, with its traceback as text (tracebacks do not pickle)."""

    def __init__(self, worker_id, exc):
        try:  # the type crosses by name: one defined inside a function cannot, and becomes a RuntimeError
            pickle.dumps(type(exc))
            self.exc_type = type(exc)
        except Exception:
            self.exc_type = RuntimeError
        self.message = (f"Caught {type(exc).__name__} in DataLoader worker process {worker_id}.\n"
                        f"Original {''.join(traceback.format_exception(exc))}")

    def reraise(self):
        try:
            error = self.exc_type(self.message)
        except Exception:  # a type whose constructor takes other arguments
            error = RuntimeError(self.message)
        raise error


def _worker_loop(conn, fetch, worker_init_fn, worker_id, num_workers, seed, parent_pid, files_kept):
    """A worker's life: seed, run worker_init_fn, then answer tasks until told to stop (None) or until
    the training process is gone. ``fetch`` is the loader's batch fetcher (data.py), with its copy of
    the data set; a task also names the shared files the training process has released."""
    global _worker_info
    # Ctrl-C reaches the whole process group: the training process stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # One thread per worker: the workers are the parallelism, and a forked worker has none of the
    # OpenMP pool's threads, so a parallel region wider than one thread would wait for them forever.
    _ember.set_num_threads(1)
    _ember.manual_seed(seed)
    random.seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed % 2**32)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, fetch.dataset)
    files = _shared_batch.WorkerFiles(files_kept)
    init_error = None
    try:
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
    except Exception as exc:
        init_error = _RaisedInWorker(worker_id, exc)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):  # the training process is gone
            return
        if task is None:
            return
        kind, indices, released = task
        files.release(released)
        if kind == "restart":
            fetch.restart()
            continue
        if init_error is not None:
            conn.send(("error", init_error, 0, None))
            continue
        try:
            files.send(conn, fetch(indices), parent_pid)
        except StopIteration:
            conn.send(("end", None, 0, None))
        except Exception as exc:
            conn.send(("error", _RaisedInWorker(worker_id, exc), 0, None))


class WorkerPool:
    """The worker processes of one DataLoader, for one epoch or, with persistent workers, for all."""

    def __init__(self, loader, fetch, base_seed):
        context = loader.multiprocessing_context
        if context is None or isinstance(context, str):
            context = multiprocessing.get_context(context)
        self.timeout = loader.timeout
        self.prefetch = loader.prefetch_factor
        self.processes, self.conns = [], []
        self.in_flight = collections.deque()  # worker ids, in the order their tasks were sent
        try:
            for worker_id in range(loader.num_workers):
                parent_end, worker_end = context.Pipe(duplex=True)
                process = context.Process(
                    target=_worker_loop, daemon=True, name=f"ember DataLoader worker {worker_id}",
                    args=(worker_end, fetch, loader.worker_init_fn, worker_id, loader.num_workers,
                          base_seed + worker_id, os.getpid(), self.prefetch + _FILES_HELD))
                self.conns.append(parent_end)
                try:
                    process.start()  # spawn and forkserver pickle the data set here
                finally:
                    worker_end.close()
                self.processes.append(process)
        except BaseException:  # the workers started so far stop; the error is the caller's
            self.close(grace=0)
            raise
        # Per worker, the ids of its shared files whose batch is gone (appended by finalizers, from any
        # thread), to be sent with its next task.
        self.released = [collections.deque() for _ in self.conns]

    @property
    def alive(self):
        """Whether the workers still run (a failure or close() ends them)."""
        return bool(self.processes)

    def batches(self, tasks, iterable):
        """The replies to ``tasks`` (lists of indices, or None for the next batch of a stream), in order.
        For a stream, a worker whose share ended leaves the rotation."""
        self._drain()
        if iterable:
            for worker in range(len(self.conns)):
                self._send(worker, "restart", None)
        active = list(range(len(self.conns)))
        turn = 0

        def submit():
            nonlocal turn
            if not active:
                return False
            task = next(tasks, _DONE)
            if task is _DONE:
                return False
            worker = active[turn % len(active)]
            turn += 1
            self._send(worker, "fetch", task)
            self.in_flight.append(worker)
            return True

        for _ in range(self.prefetch * len(self.conns)):
            if not submit():
                break
        while self.in_flight:
            worker = self.in_flight.popleft()
            reply = self._receive(worker)
            kind = reply[0]
            if kind == "end":
                if worker in active:
                    active.remove(worker)
                submit()
                continue
            if kind == "error":
                self.close()  # as after a worker that died, this pool is done
                reply[1].reraise()
            batch = _shared_batch.receive(self.conns[worker], reply, self.released[worker])
            submit()
            yield batch

    def _send(self, worker, kind, task):
        released, ids = self.released[worker], []
        while released:
            ids.append(released.popleft())
        self.conns[worker].send((kind, task, ids))

    def _receive(self, worker):
        conn, process = self.conns[worker], self.processes[worker]
        waited = 0.0
        while True:
            step = _LIVENESS_INTERVAL if not self.timeout else min(_LIVENESS_INTERVAL, self.timeout - waited)
            try:
                if conn.poll(step):
                    return conn.recv()
                alive = process.is_alive()
            except (EOFError, OSError):  # the pipe broke: the worker is gone or going
                process.join(_EXIT_WAIT)
                alive = False
            waited += step
            if not alive:
                code = process.exitcode
                self.close(grace=0)
                how = (f"was killed by signal {signal.Signals(-code).name}" if code is not None and code < 0
                       else f"exited unexpectedly with exit code {code}")
                raise RuntimeError(f"DataLoader worker {worker} (pid {process.pid}) {how}")
            if self.timeout and waited >= self.timeout:
                self.close(grace=0)
                raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds waiting for worker {worker}")

    def _drain(self):
        """Reads and drops the replies of tasks still in flight (an epoch left early), so that the next
        epoch's replies are its own."""
        while self.in_flight:
            worker = self.in_flight.popleft()
            reply = self._receive(worker)
            _shared_batch.discard(self.conns[worker], reply, self.released[worker])

    def close(self, grace=_SHUTDOWN_GRACE):
        """Stops the workers: asks each to exit, waits up to ``grace`` seconds, then terminates any left
        (at once after a failure: a stalled worker would not answer)."""
        self.in_flight.clear()
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        for process in self.processes:
            process.join(max(deadline - time.monotonic(), 0))
            if process.is_alive():
                process.terminate()
                process.join(_SHUTDOWN_GRACE)
        for conn in self.conns:
            conn.close()
        self.processes, self.conns = [], []


_DONE = object()

"""Parallel execution: batch makers in worker processes, results in task order.

The main process keeps at most ``prefetch_factor`` tasks outstanding per
worker (and that many per worker made but not yet handed out), sends each
task to the least busy worker, and waits on every worker's socket, every
worker's process sentinel and the transport's wake-up pipe at once, so a
batch, a death or a dropped batch is noticed the moment it happens.
"""

from __future__ import annotations

import itertools
import logging
import math
import select
import time
from typing import Any, Callable, Iterator

from .._options import LoaderOptions
from .._stages.task import BatchTask
from .._workers.messages import (
    BatchDone,
    BatchFailed,
    InitFailed,
    Overflow,
    ReleaseSegments,
    RunTask,
    StreamEnded,
    WaitingForRoom,
)
from .._workers.handle import Handle
from .._workers.pool import WorkerPool
from .._workers.threads import ThreadWorkerPool
from ..errors import LoaderTimeoutError, WorkerDiedError
from ..monitor import Recorder
from .reorder import ReorderBuffer

logger = logging.getLogger("dataloader")


class _Failure:
    """A worker's exception, held in the reorder buffer until its batch's turn."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _released_to(worker: Handle) -> None:
    """Count a message that freed segments of ``worker`` (see ``WaitingForRoom.heard``); it
    answers the worker's wait for room, if it was waiting."""
    worker.releases_sent += 1
    worker.waiting = None


def _poller(*fds: int) -> "select.poll":
    """A ``poll`` object watching ``fds`` for input, built once and reused for every wait."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return poller


class ParallelExecutor:
    """One epoch over a :class:`WorkerPool`.

    ``tasks`` is None when workers read their own stream shards
    (``parallel_stream=True``): then task ``k`` just asks for the next batch.
    """

    def __init__(
        self,
        pool: WorkerPool | ThreadWorkerPool,
        tasks: Iterator[BatchTask] | None,
        epoch: int,
        options: LoaderOptions,
        on_close: Callable[[], None] | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self._pool = pool
        self._recorder = recorder or Recorder(len(pool.workers))
        self._recorder.shared_memory = lambda: pool.receiver.mapped_bytes
        self._tasks = tasks
        self._epoch = epoch
        self._options = options
        self._on_close = on_close
        self._reorder = ReorderBuffer(options.in_order)
        self._in_flight = 0  # sent this epoch, not yet answered
        self._ready = 0  # answered, not yet handed out
        self._counter = itertools.count()
        self._exhausted = False
        self._ended: set[int] = set()
        self._released: dict[int, list[int]] = {}
        self._rotation = itertools.cycle(range(len(pool.workers)))
        # What every wait watches: each worker's socket and exit, and the release pipe,
        # registered once per epoch (not once per wait, as multiprocessing's wait() does).
        self._watched: dict[int, tuple[str, Handle | None]] = {}
        for worker in pool.workers:
            self._watched[worker.conn.fileno()] = ("message", worker)
            self._watched[worker.sentinel] = ("exit", worker)
        self._watched[pool.receiver.wakeup_fd] = ("release", None)
        self._poller = _poller(*self._watched)
        self._has_message = {worker.id: _poller(worker.conn.fileno()) for worker in pool.workers}
        self._overflows = 0
        self._closed = False

    def __iter__(self) -> "ParallelExecutor":
        return self

    def __next__(self) -> Any:
        # Segments of batches the user dropped since the last call ride on the task sent when
        # the next batch is handed out; they go in a message of their own only when no task
        # follows or before the main process blocks (a worker may be waiting for them).
        self._collect_releases()
        deadline = None
        while True:
            found, value = self._reorder.pop()
            if found:
                self._ready -= 1
                self._dispatch()
                self._send_releases()
                if isinstance(value, _Failure):
                    raise value.error
                return value
            self._dispatch()
            if self._exhausted and self._in_flight == 0:
                self._send_releases()
                raise StopIteration
            if deadline is None and self._options.timeout > 0:
                deadline = time.monotonic() + self._options.timeout
            self._wait(deadline)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close()

    # -- sending -----------------------------------------------------------

    def _dispatch(self) -> None:
        limit = self._options.prefetch_factor * len(self._pool.workers)
        while not self._exhausted and self._in_flight + self._ready < limit:
            worker = self._least_busy()
            if worker is None:
                break
            task = self._next_task()
            if task is None:
                self._exhausted = True
                break
            released = tuple(self._released.pop(worker.id, ()))
            self._send(worker, RunTask(task, released))
            if released:
                _released_to(worker)
            worker.outstanding[(task.epoch, task.index)] = task.indices
            self._in_flight += 1

    def _send(self, worker: Handle, message: Any) -> None:
        """Send, and if the worker is gone, first read what it said before dying.

        A worker whose ``worker_init_fn`` failed reports it and exits: that
        report, not "worker died", is the error to raise.
        """
        try:
            self._pool.send(worker, message)
        except (WorkerDiedError, OSError):
            self._drain(worker)
            raise

    def _least_busy(self) -> Handle | None:
        start = next(self._rotation)
        workers = self._pool.workers[start:] + self._pool.workers[:start]
        open_ = [w for w in workers if w.id not in self._ended]
        if not open_:
            self._exhausted = True
            return None
        # Among the least busy, one with segments to free: they ride on its task.
        released = self._released
        best = min(open_, key=lambda w: (len(w.outstanding), w.id not in released))
        return best if len(best.outstanding) < self._options.prefetch_factor else None

    def _next_task(self) -> BatchTask | None:
        if self._tasks is None:
            return BatchTask(self._epoch, next(self._counter))
        return next(self._tasks, None)

    def _collect_releases(self) -> None:
        for worker_id, segment_ids in self._pool.receiver.drain().items():
            self._released.setdefault(worker_id, []).extend(segment_ids)

    def _send_releases(self) -> None:
        for worker_id in list(self._released):
            segment_ids = tuple(self._released.pop(worker_id))
            worker = self._pool.workers[worker_id]
            self._send(worker, ReleaseSegments(segment_ids))
            _released_to(worker)

    # -- receiving ---------------------------------------------------------

    def _wait(self, deadline: float | None) -> None:
        # A batch already here is handled without sending the releases first: its task takes them.
        if self._released and self._receive(self._poller.poll(0)):
            return
        receiver = self._pool.receiver
        receiver.sleeping = True  # before reading the queue: a drop from now on wakes the poll
        try:
            self._collect_releases()
            self._send_releases()
            self._grant_overflow()
            timeout = None if deadline is None else max(0, math.ceil((deadline - time.monotonic()) * 1000))
            ready = self._poller.poll(timeout)
        finally:
            receiver.sleeping = False
        if not self._receive(ready):
            raise self._timeout_error()

    def _receive(self, ready: list[tuple[int, int]]) -> bool:
        """Handle what ``poll`` found ready; False if nothing was."""
        exits = []
        for fd, _ in ready:
            kind, worker = self._watched[fd]
            if kind == "message":
                self._drain(worker, readable=True)
            elif kind == "exit":
                exits.append(worker)
            else:
                self._collect_releases()
        for worker in exits:
            self._drain(worker)
            self._pool.raise_if_dead(worker)
        return bool(ready)

    def _drain(self, worker: Handle, readable: bool = False) -> None:
        """Handle every message waiting from ``worker`` (``readable``: its socket polled so)."""
        has_message = self._has_message[worker.id]
        try:
            while readable or has_message.poll(0):
                readable = False
                self._handle(worker, self._pool.receive(worker))
        except (EOFError, ConnectionResetError, BrokenPipeError):
            self._pool.raise_if_dead(worker, wait=1.0)
            raise

    def _handle(self, worker: Handle, message: Any) -> None:
        if isinstance(message, (BatchDone, BatchFailed, StreamEnded)):
            worker.outstanding.pop((message.epoch, message.index), None)
            if message.epoch != self._epoch:
                if isinstance(message, BatchDone):  # a previous epoch's leftover
                    self._pool.receiver.discard(worker.id, message.payload)
                    self._collect_releases()
                return
            self._in_flight -= 1
        if isinstance(message, BatchDone):
            start = time.perf_counter()
            self._reorder.put(message.index, self._pool.receiver.decode(worker.id, message.payload))
            self._ready += 1
            end = time.perf_counter()
            times = message.timings
            # Encoding in the worker plus decoding here; time spent queued in the socket
            # while the consumer was busy is not the transport's cost.
            cost = (end - start) + (max(0.0, message.sent - times.collated) if times and message.sent else 0.0)
            self._recorder.batch_made(worker.id, message.index, times, end, cost)
        elif isinstance(message, BatchFailed):
            self._reorder.put(message.index, _Failure(message.error.rebuild()))
            self._ready += 1
        elif isinstance(message, StreamEnded):
            self._ended.add(worker.id)
            self._reorder.skip(message.index)
        elif isinstance(message, WaitingForRoom):
            # Sent before it read a release already on its way: that release answers it (and
            # the worker asks again if it frees too little). Granting the pipe here would
            # warn of a fallback that never happens.
            if message.heard >= worker.releases_sent:
                worker.waiting = message  # on the handle: it outlives this epoch
        elif isinstance(message, InitFailed):
            raise message.error.rebuild()

    def _grant_overflow(self) -> None:
        """Workers waiting for room while we wait for them would wait forever: let them copy."""
        for worker in self._pool.workers:
            waiting, worker_id = worker.waiting, worker.id
            if waiting is None:
                continue
            worker.waiting = None
            self._overflows += 1
            log = logger.warning if self._overflows == 1 else logger.debug  # once per epoch
            if waiting.needed > waiting.budget:
                log(
                    "DataLoader worker %d: a batch of %.1f MiB is larger than its shared-memory "
                    "budget of %.1f MiB; sending batches through a pipe instead (slower). Raise "
                    "shm_budget to at least %d bytes (it is split between the workers).",
                    worker_id, waiting.needed / 2**20, waiting.budget / 2**20,
                    2 * waiting.needed * len(self._pool.workers),
                )
            else:
                log(
                    "DataLoader worker %d: its shared-memory budget is full of batches the training "
                    "loop still holds; sending batches through a pipe instead (slower). Drop "
                    "references to old batches, or raise shm_budget.",
                    worker_id,
                )
            self._send(worker, Overflow())

    def _timeout_error(self) -> LoaderTimeoutError:
        lines = [
            f"DataLoader timeout: no batch arrived within {self._options.timeout:g} s "
            "(timeout=...). Raise `timeout` if batches are legitimately slow; otherwise the "
            "stack below shows where the dataset or transform is stuck."
        ]
        for worker in self._pool.workers:
            if not worker.outstanding:
                continue
            (_, index), indices = next(iter(worker.outstanding.items()))
            what = f"indices {indices}" if indices is not None else "its stream"
            lines.append(
                f"{worker.label} has been making batch {index} from {what}; "
                f"its stack:\n{self._pool.stack(worker).rstrip() or '(unavailable)'}"
            )
        return LoaderTimeoutError("\n".join(lines))

"""The floor's workers: forked processes that stack batches straight into shared segments.

Each worker owns ``SEGMENTS_PER_WORKER`` segments (memfd files, their pages reserved up front
and mapped before the fork, as our loader's workers make theirs) and names a finished batch's
segment in 5 bytes through a pipe; the main process hands batches out in order as views of the
segments. Nothing is pickled and nothing is checked: the least a zero-copy process transport
costs. The segments are this bench's own few lines of stdlib (``os.memfd_create`` and
``mmap``), not the library's: the floor must not move when the library's transport does.
"""

from __future__ import annotations

import mmap
import os
import select
import struct
import time
import traceback
from typing import Any, Iterator

import numpy as np

from .batches import stack

SEGMENTS_PER_WORKER = 3  # as many as our workers keep in rotation at prefetch_factor=2
PREFETCH = 2
_DONE = struct.Struct("<iB")  # batch number, segment
_ALIGNMENT = 64  # each field of a batch starts on a cache line, as in our segments


def _align(offset: int) -> int:
    """``offset`` rounded up to a multiple of the alignment."""
    return (offset + _ALIGNMENT - 1) & ~(_ALIGNMENT - 1)


def segment(size: int) -> mmap.mmap:
    """``size`` bytes of anonymous shared memory, mapped read-write: a memfd whose pages are
    reserved up front (no SIGBUS later), its descriptor closed once mapped."""
    fd = os.memfd_create("bench-floor", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        os.posix_fallocate(fd, 0, size)
        return mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


class FloorWorkers:
    """``workers`` forked processes making batch ``b`` from ``order[b*bs:(b+1)*bs]`` straight
    into shared segments. Iterating yields batches as views; each is freed at the next step."""

    def __init__(self, dataset: Any, order: list[int], batch_size: int, workers: int,
                 main_us: float = 0.0) -> None:
        self._dataset, self._order, self._batch_size = dataset, order, batch_size
        self._main_s = main_us / 1e6
        first = stack([dataset[i] for i in order[:batch_size]])
        self._fields = [(a.shape, a.dtype) for a in first]
        offsets, end = [], 0
        for shape, dtype in self._fields:
            offsets.append(end)
            end = _align(end + int(np.prod(shape)) * dtype.itemsize)
        self._offsets, size = offsets, end
        self._maps = [[segment(size) for _ in range(SEGMENTS_PER_WORKER)]
                      for _ in range(workers)]
        self._views = [[self._layout(m) for m in row] for row in self._maps]
        self._pids, self._tasks, self._done = [], [], []
        for w in range(workers):
            task_r, task_w = os.pipe()
            done_r, done_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child
                # Its own parent-side ends, and those of the workers forked before it.
                for fd in (task_w, done_r, *self._tasks, *self._done):
                    os.close(fd)
                self._serve(w, task_r, done_w)
            os.close(task_r)
            os.close(done_w)
            self._pids.append(pid)
            self._tasks.append(task_w)
            self._done.append(done_r)

    def _layout(self, segment: mmap.mmap) -> tuple[np.ndarray, ...]:
        return tuple(
            np.ndarray(shape, dtype, buffer=segment, offset=offset)
            for (shape, dtype), offset in zip(self._fields, self._offsets)
        )

    def _serve(self, worker: int, task_r: int, done_w: int) -> None:  # pragma: no cover - child
        code = 0
        try:
            views = self._views[worker]
            while True:
                message = os.read(task_r, _DONE.size)
                if len(message) < _DONE.size:
                    break
                number, segment = _DONE.unpack(message)
                start = number * self._batch_size
                samples = [self._dataset[i] for i in self._order[start : start + self._batch_size]]
                for k, out in enumerate(views[segment]):
                    column = [s[k] for s in samples]
                    if isinstance(column[0], np.ndarray):
                        np.stack(column, out=out)
                    else:
                        out[...] = column
                os.write(done_w, message)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)

    def __iter__(self) -> Iterator[tuple[np.ndarray, ...]]:
        batches = len(self._order) // self._batch_size
        free = [list(range(SEGMENTS_PER_WORKER)) for _ in self._pids]
        outstanding = [0] * len(self._pids)
        sent = 0
        poller = select.poll()
        for fd in self._done:
            poller.register(fd, select.POLLIN)
        owner = {fd: w for w, fd in enumerate(self._done)}
        ready: dict[int, tuple[int, int]] = {}  # batch number -> (worker, segment)
        held: tuple[int, int] | None = None

        def dispatch(w: int) -> None:
            nonlocal sent
            while sent < batches and outstanding[w] < PREFETCH and free[w]:
                try:
                    os.write(self._tasks[w], _DONE.pack(sent, free[w].pop()))
                except BrokenPipeError:  # it died before its report pipe said so
                    raise _exited(w) from None
                outstanding[w] += 1
                sent += 1

        for w in range(len(self._pids)):
            dispatch(w)
        for number in range(batches):  # in order, as our loader delivers by default
            while number not in ready:
                for fd, _ in poller.poll():
                    w = owner[fd]
                    data = os.read(fd, _DONE.size * 64)
                    if not data:
                        raise _exited(w)
                    for at in range(0, len(data), _DONE.size):
                        done, segment = _DONE.unpack_from(data, at)
                        ready[done] = (w, segment)
                        outstanding[w] -= 1
            w, segment = ready.pop(number)
            if held is not None:  # the consumer is done with the previous batch
                free[held[0]].append(held[1])
                dispatch(held[0])
            held = (w, segment)
            dispatch(w)
            if self._main_s:
                spend(self._main_s)
            yield self._views[w][segment]

    def close(self) -> None:
        # No more tasks: each worker finishes what it has, reports it and exits; its
        # report pipe is closed only then, so no worker writes into a closed pipe.
        for fd in self._tasks:
            os.close(fd)
        for pid in self._pids:
            os.waitpid(pid, 0)
        for fd in self._done:
            os.close(fd)
        self._views = []
        for row in self._maps:
            for segment in row:
                segment.close()

    def __enter__(self) -> "FloorWorkers":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def spend(seconds: float) -> None:
    """Use ``seconds`` of this thread's CPU: stands in for a loader's work per batch."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _exited(worker: int) -> RuntimeError:
    return RuntimeError(f"benchmarks.floor: worker {worker} exited (its traceback is above)")

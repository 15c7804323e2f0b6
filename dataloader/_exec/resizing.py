"""Resizing: an epoch's pool grows and shrinks while it runs (the autotuner's lever).

A new worker starts beside the others and takes tasks as soon as it has room. A worker that
goes is first ``leaving``: it gets no more tasks, finishes the ones it has (the batches it
holds are not lost), and only then is asked to exit; the waiter reaps it when it has. Which
worker made a batch never decides what the batch holds (batches are seeded by their index),
so the batches and their order are those of any fixed pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._workers.handle import Handle
    from .._workers.pool import WorkerPool
    from .._workers.threads import ThreadWorkerPool
    from .dispatch import Dispatcher
    from .releases import Releases
    from .waiting import Waiter


# Tasks a new worker answers before it counts as started (its first batches cost more).
WARM_TASKS = 3


class PoolResizer:
    """Sets the number of workers an epoch's pool has and the tasks each may have ahead."""

    def __init__(self, pool: WorkerPool | ThreadWorkerPool, dispatcher: Dispatcher, waiter: Waiter, releases: Releases) -> None:
        self._pool = pool
        self._dispatcher = dispatcher
        self._waiter = waiter
        self._releases = releases
        self._fresh: list[Handle] = []  # added, and not yet answered WARM_TASKS tasks

    @property
    def size(self) -> int:
        """Workers that take tasks (leaving ones excluded)."""
        return len(self._pool.workers) - len(self._pool.retired) - len(self._dispatcher.leaving)

    @property
    def warming(self) -> bool:
        """Whether a worker added lately has yet to answer its first few tasks: it may still be
        starting, or making its first segments and importing what its first samples need, and a
        measurement now would not show what it adds."""
        self._fresh = [w for w in self._fresh if w.answered < WARM_TASKS and w.id not in self._pool.retired]
        return bool(self._fresh)

    def resize(self, workers: int) -> None:
        """Make the pool ``workers`` strong (at least one)."""
        leaving = self._dispatcher.leaving
        while self.size < max(1, workers):
            if leaving:  # one on its way out stays instead: no start-up to pay
                leaving.discard(max(leaving))
                continue
            added = self._pool.add_worker()
            self._waiter.watch(added)
            self._fresh.append(added)
        while self.size > max(1, workers):
            leaving.add(self._next_to_leave().id)
        self.settle()

    def set_depth(self, messages_ahead: int) -> None:
        """Let each worker have ``messages_ahead`` messages of tasks outstanding."""
        self._dispatcher.messages_ahead = max(1, messages_ahead)

    def settle(self) -> None:
        """Stop the leaving workers that have answered all they had."""
        leaving = self._dispatcher.leaving
        for worker_id in sorted(leaving):
            worker = self._pool.workers[worker_id]
            if worker.outstanding:
                continue
            leaving.discard(worker_id)
            self._releases.pending.pop(worker_id, None)  # its segments go with it
            self._pool.stop_worker(worker)  # type: ignore[arg-type]

    def _next_to_leave(self) -> Handle:
        """The open worker with the least work in hand (the newest among equals)."""
        pool, leaving = self._pool, self._dispatcher.leaving
        open_ = [w for w in pool.workers if w.id not in pool.retired and w.id not in leaving]
        return min(reversed(open_), key=lambda worker: len(worker.outstanding))

"""Dispatch: which worker makes the next task, and whether there is room for it yet."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from .._stages.task import BatchTask
from .._workers.messages import RunTask, RunTasks
from .grouping import GroupSize
from .releases import Releases, released_to

if TYPE_CHECKING:
    from .._workers.handle import Handle
    from .._workers.pool import WorkerPool
    from .._workers.threads import ThreadWorkerPool


class Dispatcher:
    """Sends an epoch's tasks to the least busy workers, within the prefetch limits.

    Tasks go ``group.size`` to a message (one, or several small ones: see ``grouping.py``).
    A worker has at most ``messages_ahead`` (``prefetch_factor``) messages' worth of tasks
    outstanding, and the epoch at most ``messages_ahead * num_workers`` messages' worth in
    flight or made and not yet handed out: finished batches waiting for a slow earlier one
    count, so they cannot pile up without bound. The autotuner may change ``messages_ahead``
    and the workers (a worker ``leaving`` finishes what it has and gets nothing more).
    When workers read their own stream shards, a worker whose stream has ended gets no more
    tasks, and the epoch ends when every worker's has; in a resumed epoch, each one's first task
    says how many batches of its shard to drop first (``skips``).
    ``rotate`` (worker streams read in order, or ``dispatch="round_robin"``): tasks go one to a
    message to the open workers in turn, whatever their load, so each run interleaves the shards
    alike; the turn starts after ``last_worker`` (the worker whose batch a resumed state handed
    out last; -1: none). With ``skip_full`` (round robin with ``in_order=False``, as PyTorch
    does) a worker whose turn it is but has no room is passed over, rather than waited for.
    """

    def __init__(
        self,
        pool: WorkerPool | ThreadWorkerPool,
        tasks: Iterator[BatchTask],
        messages_ahead: int,
        releases: Releases,
        send: Callable[[Handle, Any], None],
        skips: dict[int, int] | None = None,
        group: GroupSize | None = None,
        rotate: bool = False,
        last_worker: int = -1,
        skip_full: bool = False,
    ) -> None:
        self._workers = pool.workers
        self._tasks = tasks
        self.messages_ahead = messages_ahead  # the prefetch depth; the autotuner may change it
        self.leaving: set[int] = set()  # workers that get no more tasks (the pool shrinks)
        self._releases = releases
        self._send = send
        self._rotation = itertools.count()
        self._ended: set[int] = set()  # workers whose own stream has ended
        self.retired = pool.retired  # dead workers, replaced
        self._skips = dict(skips or {})  # worker id -> batches of its shard to drop first
        # A group of tasks to one worker would break the interleave: rotation sends them singly.
        self.group = GroupSize(1) if rotate else group or GroupSize(1)
        self._rotate = rotate
        self._skip_full = skip_full
        self._turn = _after(pool.workers, last_worker)  # rotate: position of the next worker in turn
        self.exhausted = False  # no task left to send
        self.in_flight = 0  # sent this epoch, not yet answered
        self.ready = 0  # answered, not yet handed out

    @property
    def finished(self) -> bool:
        """Every task sent and answered."""
        return self.exhausted and self.in_flight == 0

    def dispatch(self) -> None:
        """Send tasks while there is room; each message carries its worker's pending releases."""
        while not self.exhausted:
            size = self.group.size
            open_workers = len(self._workers) - len(self.retired) - len(self.leaving)
            if self.in_flight + self.ready + size > self.messages_ahead * open_workers * size:
                break
            worker = self._in_turn() if self._rotate else self._least_busy(size)
            if worker is None:
                break
            tasks = self._next_tasks(size)
            if not tasks:
                self.exhausted = True
                break
            self._turn += 1
            if self._skips:
                tasks[0] = replace(tasks[0], skip=self._skips.pop(worker.id, 0))
            released = self._releases.take(worker.id)
            message = RunTask(tasks[0], released) if len(tasks) == 1 else RunTasks(tuple(tasks), released)
            # Outstanding before the send: a send that finds the worker dead raises, and the
            # recovery remakes what the dead worker had; tasks noted after it would be lost, and
            # the epoch would end early with its later batches held back (issue 45, item 1).
            sent_with = (tasks[0].index, tasks[-1].index)  # for the timeout report
            for task in tasks:
                worker.outstanding[(task.epoch, task.index)] = (task, sent_with)
            self.in_flight += len(tasks)
            self._send(worker, message)
            if released:
                released_to(worker)

    def handed_out(self) -> None:
        """A batch left the reorder buffer: its place goes to the next task."""
        self.ready -= 1
        self.dispatch()

    def answered(self) -> None:
        """A worker answered a task of this epoch."""
        self.in_flight -= 1

    def made(self) -> None:
        """A batch (or a failure in its place) is in the reorder buffer."""
        self.ready += 1

    def measured(self, seconds: float, payload: Any) -> None:
        """A batch took ``seconds`` to make and travels as ``payload``: where messages are
        sized from measured batches, it sizes the later ones."""
        if self.group.measures:
            self.group.observe(seconds, payload.nbytes)

    def resend(self, worker: Handle, tasks: Sequence[BatchTask]) -> None:
        """Send ``tasks``, which a dead worker had, to ``worker`` (they stay in flight). All are
        ``worker``'s before the first send, which raises if ``worker`` died too: its recovery
        then finds every one of them."""
        for task in tasks:
            worker.outstanding[(task.epoch, task.index)] = (task, (task.index, task.index))
        for task in tasks:
            self._send(worker, RunTask(task, ()))

    def stream_ended(self, worker_id: int) -> None:
        """The worker's own stream is exhausted: it gets no more tasks."""
        self._ended.add(worker_id)

    def _least_busy(self, size: int) -> Handle | None:
        """The open worker with the fewest outstanding tasks, if it has room for ``size`` more.
        Ties go to a rotating start, so that work spreads evenly."""
        start = next(self._rotation) % len(self._workers)
        workers = self._workers[start:] + self._workers[:start]
        open_ = [w for w in workers if self._is_open(w)]
        if not open_:
            self.exhausted = True
            return None
        # Among the least busy, one with segments to free: they ride on its task.
        released = self._releases.pending
        best = min(open_, key=lambda w: (len(w.outstanding), w.id not in released))
        return best if len(best.outstanding) + size <= self.messages_ahead * size else None

    def _in_turn(self) -> Handle | None:
        """The next open worker in the rotation if it has room; None while it has none (the
        task waits for it: passing it over would change the interleave), unless ``skip_full``:
        then the next open worker after it that has room."""
        count = len(self._workers)
        first_open = None
        for step in range(count):
            position = (self._turn + step) % count
            worker = self._workers[position]
            if not self._is_open(worker):
                continue  # closed workers stay closed: the turn skips them for good
            if first_open is None:
                first_open = position
            if len(worker.outstanding) < self.messages_ahead:
                self._turn = position
                return worker
            if not self._skip_full:
                break
        if first_open is None:
            self.exhausted = True
        else:
            self._turn = first_open
        return None

    def _is_open(self, worker: Handle) -> bool:
        """Neither replaced, stopped or leaving, nor known to have ended its stream."""
        return worker.id not in self._ended and worker.id not in self.retired and worker.id not in self.leaving

    def _next_tasks(self, size: int) -> list[BatchTask]:
        """Up to ``size`` tasks; fewer only at the end of the epoch."""
        tasks = list(itertools.islice(self._tasks, size))
        if len(tasks) < size:
            self.exhausted = True
        return tasks


def _after(workers: Sequence[Handle], worker_id: int) -> int:
    """The position in ``workers`` of the one after worker ``worker_id`` (0 when none has that id)."""
    ids = [worker.id for worker in workers]
    return (ids.index(worker_id) + 1) % len(ids) if worker_id in ids else 0

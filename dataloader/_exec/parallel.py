"""Parallel execution: batch makers in workers, results handed out in task order.

The executor composes one part per job: the :class:`Dispatcher` sends tasks to the least
busy workers (workers reading their own stream shards in order: to each in turn) within the
prefetch limits (``dispatch.py``), :class:`Releases` carries the
segments of dropped batches back to their workers (``releases.py``), the :class:`Waiter`
blocks on every worker's socket and exit and the wake-up pipe at once (``waiting.py``), the
:class:`Inbox` handles what workers send (``inbox.py``), :class:`OverflowGrants` lets a
worker with full shared memory send inline (``overflow.py``), :func:`timeout_error`
says what each worker was doing when no batch came (``timeout_report.py``), and the
:class:`PoolResizer` grows and shrinks the pool for the autotuner (``resizing.py``).

Another thread may close the epoch while one waits in ``next()``: :class:`Occupancy` makes the
closer wake the waiting thread (the waiter's wake-up pipe) and tear down only once it has left.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from .._failure import Failure
from .._options import LoaderOptions
from .._workers.process_view import WorkerProcess
from .._stages.occupancy import Occupancy, Stopped
from .._stages.position import Resume
from .._stages.stage import Stage
from .._stages.task import BatchTask, listed
from .._workers.pool import WorkerPool
from .._workers.threads import ThreadWorkerPool
from ..errors import DataLoaderError, WorkerDiedError
from ..monitor import Recorder
from .dispatch import Dispatcher
from .grouping import GroupSize
from .inbox import Inbox
from .overflow import OverflowGrants
from .releases import Releases
from .reorder import ReorderBuffer
from .sender import Sender
from .timeout_report import timeout_error
from .recovery import recovery_for
from .resizing import PoolResizer
from .waiting import Waiter


class ParallelExecutor(Stage):
    """One epoch over a :class:`WorkerPool` or a :class:`ThreadWorkerPool`.

    Each item is ``(batch, task indices, worker id)``: which tasks and worker made the batch
    travel with it to :class:`~dataloader._stages.position.Tally`.

    Its upstream is the epoch's ``tasks``, closed with it; ``on_close`` then
    releases the rest (stops a pool that lives only for this epoch). ``owner`` (the loader's
    pipeline, which owns persistent workers) is kept alive until the epoch is closed.
    ``resume``: where a resumed epoch starts (its first task, the tasks it leaves out, and the
    batches each worker reading its own stream shard drops first).
    """

    def __init__(
        self,
        pool: WorkerPool | ThreadWorkerPool,
        tasks: Iterator[BatchTask],
        epoch: int,
        options: LoaderOptions,
        on_close: Callable[[], None] | None = None,
        recorder: Recorder | None = None,
        owner: Any = None,
        resume: Resume | None = None,
        worker_streams: bool = False,
        tuner: Any = None,
    ) -> None:
        super().__init__(tasks)
        self._owner = owner
        self._occupancy = Occupancy()
        self._pool = pool
        self._recorder = recorder or Recorder(len(pool.workers))
        self._recorder.shared_memory = lambda: pool.receiver.mapped_bytes
        self._timeout = options.timeout
        self._epoch = epoch
        self._on_close = on_close
        self._reorder = ReorderBuffer(options.in_order, *((resume.low, resume.above) if resume else ()))
        # No part refers back to one that refers to it (the sender reads through a weak
        # reference), so the epoch and the batches it holds go as soon as it is dropped.
        sender = Sender(pool)
        self._releases = Releases(pool, sender.send)
        # Worker streams read in order take tasks in turn, so the shards interleave alike in every
        # run; dispatch="round_robin" hands every loader's tasks out in turn.
        rotate = options.dispatch == "round_robin" or (worker_streams and options.in_order)
        self._dispatcher = Dispatcher(
            pool, tasks, options.messages_ahead, self._releases, sender.send,
            resume.workers if resume else None, GroupSize(options.fixed_group),
            rotate, resume.last_worker if resume else -1,
            skip_full=not options.in_order,  # out of order, a busy worker's turn passes (PyTorch's way)
        )
        inbox = Inbox(pool.receiver, epoch, self._reorder, self._dispatcher, self._releases, self._recorder)
        self._waiter = Waiter(pool, inbox, self._releases, OverflowGrants(pool.workers, sender.send))
        sender.reads_last_words_with(self._waiter.drain)
        self._recovery = recovery_for(
            pool, epoch, self._waiter, self._dispatcher, self._releases, options, worker_streams
        )
        self.resizer = PoolResizer(pool, self._dispatcher, self._waiter, self._releases)
        # num_workers="auto": told of every batch handed out; sizes the pool through the resizer.
        self._tuner = tuner.attach(self.resizer, self._recorder, self._worker_pids) if tuner else None

    def __next__(self) -> Any:
        if not self._occupancy.enter():
            raise StopIteration
        try:
            return self._next()
        finally:
            self._occupancy.leave()

    def _next(self) -> Any:
        # Segments of batches the user dropped since the last call ride on the task sent when
        # the next batch is handed out; they go in a message of their own only when no task
        # follows or before the main process blocks (a worker may be waiting for them).
        self._releases.collect()
        deadline = None
        while True:
            if self._occupancy.stopping:  # closed from another thread, which woke this wait
                raise Stopped()
            found, value = self._reorder.pop()
            if found:
                index, worker = self._reorder.last
                if self._tuner is not None:
                    self._tuner.tick()
                try:  # sends: the next task, releases; a worker found dead then is recovered too
                    self._dispatcher.handed_out()
                    self._releases.send_all()
                except WorkerDiedError as error:
                    self._recover(error)
                if isinstance(value, Failure):
                    raise value.error
                return value, (index,), worker
            try:
                self._dispatcher.dispatch()
                if self._dispatcher.finished:
                    self._releases.send_all()
                    self._check_nothing_held()
                    raise StopIteration
                if deadline is None and self._timeout > 0:
                    deadline = time.monotonic() + self._timeout
                if not self._waiter.wait(deadline):
                    raise timeout_error(self._pool, self._timeout)
                if self._dispatcher.leaving:
                    self.resizer.settle()
            except WorkerDiedError as error:
                self._recover(error)
                deadline = None

    def _recover(self, error: WorkerDiedError) -> None:
        """Go on after a worker's death, or raise it (naming the batches it had not answered).

        A sample that kills its worker, under on_error="skip"/"replace": found, and a fresh
        worker makes the dead one's batches without it (see recovery.py). A death met while
        recovering (the fresh worker killed by another sample) is recovered the same way.
        """
        while self._recovery is not None:
            try:
                if self._recovery.recover(error):
                    return
                break
            except WorkerDiedError as another:
                error = another
        _name_indices(error, self._pool)
        raise error

    def _check_nothing_held(self) -> None:
        """Every task is answered: a batch still held back waits for one that never came. The
        epoch must not end as if complete (that would lose the held batches silently)."""
        held = len(self._reorder)
        if held:
            raise DataLoaderError(
                f"epoch {self._epoch} ran out of tasks with {held} finished batch(es) held back "
                f"waiting for batch {self._reorder.waiting_for}, which no worker answered; the "
                "epoch is incomplete. This is a bug in dataloader: please report it with the "
                "loader's options (num_workers, persistent_workers, on_error, start method)."
            )

    def worker_processes(self) -> list[Any]:
        """The epoch's workers, replacements and stopped ones included: a
        :class:`~dataloader._workers.process_view.WorkerProcess` per process (answering as a
        ``multiprocessing.Process`` does), or the ``threading.Thread`` of a thread worker."""
        return [
            WorkerProcess(worker) if hasattr(worker, "process") else getattr(worker, "thread")
            for worker in self._pool.workers
        ]

    def _worker_pids(self) -> list[int]:
        """The pids of the workers that take tasks (the tuner measures their memory)."""
        retired = self._pool.retired
        return [worker.pid for worker in self._pool.workers if worker.id not in retired]

    def close(self) -> None:
        self.closed = True
        self._occupancy.close(self._teardown, self._waiter.wake)

    def _teardown(self) -> None:
        on_close, self._on_close = self._on_close, None
        try:
            if on_close is None:
                self._give_back_segments()
            super()._teardown()
        finally:
            self._waiter.close()
            try:
                if on_close is not None:
                    on_close()
            finally:
                self._owner = None  # a loader already dropped now stops its persistent workers

    def _give_back_segments(self) -> None:
        """Workers that outlive the epoch get back the segments of batches dropped so far."""
        try:
            self._releases.collect()
            self._releases.send_all()
        except Exception:  # a dead worker, a pool already stopped: nothing left to give back to
            pass


def _name_indices(error: WorkerDiedError, pool: Any) -> None:
    """Add to ``error`` the indices of the batches its worker had not answered (one of them
    killed it, or it was killed while making them)."""
    worker = next((w for w in pool.workers if w.id == error.worker_id), None)
    if worker is None or error.indices is not None:
        return
    tasks = [task for task, _ in worker.outstanding.values() if task.indices is not None]
    if not tasks:
        return
    error.indices = [index for task in tasks for index in listed(task.indices)]
    batches = "; ".join(f"batch {task.index}: {listed(task.indices)}" for task in tasks[:4])
    more = f" and {len(tasks) - 4} more" if len(tasks) > 4 else ""
    error.args = (
        f"{error.args[0]} It had not answered these batches (the one it was making comes first): "
        f"{batches}{more}. If one sample kills it, on_error='skip' or 'replace' finds and leaves "
        "it out (see docs/bad-samples.md).",
    )

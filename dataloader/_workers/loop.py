"""The loop a worker process runs.

States: starting -> idle (blocked on its socket) -> making a batch -> [waiting
for room: its shared-memory budget is full of batches the user still holds]
-> idle ... -> stopped (Shutdown message, the socket closed, or the parent gone).
The worker never decides what to make: it runs the stages it is handed, task
by task, in the order the main process sends them.

Whatever fails while starting (unpickling the boot record under spawn and
forkserver, seeding, ``worker_init_fn``) is sent home as :class:`InitFailed`
with the exception whole, and the worker exits: the user sees the original
error, not a worker that "exited with code 1".

A ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``,
``GeneratorExit``) raised while a batch is made goes home too, as a :class:`BatchFailed` that
ends the epoch, and the worker lives on: it is no bad sample (``on_error`` never skips or
replaces it), and no worker death either. The user gets it as in serial mode, its own type.
"""

from __future__ import annotations

import collections
import faulthandler
import logging
import os
import pickle
import select
import signal
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable

from .._alloc import use_allocator
from .._local import mark_worker_process, set_worker_info
from .._failure import LEFT_OUT
from .._stages.bad_samples import ErrorPolicy
from .._stages.batch import BatchMaker
from .._stages.seeding import seed_all
from .._stages.shard import ShardReader
from .._stages.task import BatchTask, listed
from .._transport.arena import BumpAllocator, Segment, SegmentPool
from .._transport.codec import LocalBatch, SharedBatch, fits_inline, inline, pack, split
from .._transport.mapping import unsendable
from .._transport.skeleton import SkeletonNames
from ..errors import ArgumentTypeError
from ..worker import WorkerInfo
from .messages import (
    BatchDone,
    BatchFailed,
    BatchLeftOut,
    InitFailed,
    Overflow,
    ReleaseSegments,
    Replies,
    RunTask,
    RunTasks,
    SegmentCreated,
    SegmentRetired,
    Shutdown,
    Started,
    StreamEnded,
    WaitingForRoom,
)
from .arrow_pool import use_own_arrow_pool
from .fd_passing import send_descriptor
from .heap import keep_freed_memory
from .native_threads import use_one_native_thread
from .remote_error import RemoteError
from .wire import Wire

logger = logging.getLogger("dataloader")


@dataclass(frozen=True)
class WorkerBoot:
    """Everything one worker needs, sent once at start."""

    worker_id: int
    num_workers: int
    seed: int
    dataset: Any
    transform: Any
    collator: Any
    worker_init_fn: Callable[[int], None] | None
    shm_budget: int
    name: str
    # parallel_stream: the worker reads its own copy of the stream, batch_size at a time (a
    # BatchSize, which also says whether the shard's short last batch is dropped: drop_last).
    stream_batch_size: int | None
    # Under fork the child inherits the parent's end of the liveness pipe; it must close it.
    close_fds: tuple[int, ...]
    # Fixed-size epochs: the worker's stream carries on across epochs, restarting when it ends.
    restart_stream: bool = False
    # What becomes of a sample that fails (on_error), and the hooks told of every stage run.
    policy: ErrorPolicy = field(default_factory=ErrorPolicy)
    hooks: tuple = ()
    # A thread worker of a loader given seed=: say if code draws from the shared global generators.
    watch_global_draws: bool = False
    # seeding="batch": random state seeded per batch; False (seeding="worker"): only at start.
    seed_per_batch: bool = True


class PickledBoot:
    """A :class:`WorkerBoot` on its way to a spawn or forkserver worker.

    It is pickled when ``multiprocessing`` pickles the worker's ``Process``, by multiprocessing's
    own pickler while the child is being spawned: what multiprocessing lets a child inherit (a
    ``Value``, a ``Lock``, a ``Queue``) travels in the dataset as it does to PyTorch's workers,
    and a part that does not pickle is named before any worker starts. The worker unpickles it
    in :func:`run_worker`, not before its own code runs, where a dataset that fails to unpickle
    could only print a traceback and exit: the failure goes home like any other worker error.
    """

    def __init__(self, boot: WorkerBoot, method: str) -> None:
        self.worker_id = boot.worker_id
        self._boot: WorkerBoot | None = boot
        self._method = method
        self._data = b""

    def __getstate__(self) -> dict[str, Any]:
        assert self._boot is not None, "a PickledBoot travels once"
        return {"worker_id": self.worker_id, "data": _pickled(self._boot, self._method)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.worker_id, self._data, self._boot, self._method = state["worker_id"], state["data"], None, ""

    def load(self) -> WorkerBoot:
        return pickle.loads(self._data)


_SENT_PARTS = ("dataset", "transform", "collator", "worker_init_fn")


def _pickled(boot: WorkerBoot, method: str) -> bytes:
    """``boot`` pickled by multiprocessing's pickler; a part that does not pickle is named."""
    try:
        return bytes(ForkingPickler.dumps(boot, pickle.HIGHEST_PROTOCOL))
    except Exception as whole_error:
        for name in _SENT_PARTS:
            value = getattr(boot, name)
            try:
                ForkingPickler.dumps(value, pickle.HIGHEST_PROTOCOL)
            except Exception as error:
                raise ArgumentTypeError(
                    f"`{name}` ({type(value).__name__}) cannot be pickled, and the {method!r} start "
                    f"method sends it to each worker by pickling: {error}. Define it at module "
                    "level (not inside a function, not a lambda), or use multiprocessing_context='fork'."
                ) from error
        raise whole_error


class StopWorker(Exception):
    """The main process asked this worker to stop."""


def run_worker(
    boot: WorkerBoot | PickledBoot, conn: Connection, parent_alive: Connection, stack_out: Connection
) -> None:
    """Entry point of a worker process."""
    mark_worker_process()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    exit_when_parent_dies(parent_alive.fileno())
    faulthandler.register(signal.SIGUSR1, file=stack_out.fileno(), all_threads=True, chain=False)
    wire = Wire(conn)
    stage = "unpickling"
    forked = not isinstance(boot, PickledBoot)  # fork hands the boot over as it is
    try:
        if isinstance(boot, PickledBoot):
            boot = boot.load()
        stage = "start-up"
        for fd in boot.close_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        # Before worker_init_fn (in start), which may raise a count again.
        capped = use_one_native_thread()
        logger.debug("worker %d: thread pools capped at 1: %s", boot.worker_id, ", ".join(capped) or "none")
        logger.debug("worker %d: freed memory kept for the next batch: %s", boot.worker_id, keep_freed_memory())
        if forked:
            logger.debug("worker %d: Arrow allocates from %s", boot.worker_id, use_own_arrow_pool())
        worker = WorkerLoop(boot, wire)
    except BaseException as error:  # SystemExit from a dataset's __setstate__ too: sent home whole
        wire.send(InitFailed(RemoteError.capture(error, boot.worker_id, os.getpid(), None, stage)))
        return
    try:
        worker.start()
        worker.serve()
    except (StopWorker, EOFError, BrokenPipeError, ConnectionResetError):
        pass
    finally:
        worker.pool.close()


def exit_when_parent_dies(fd: int) -> None:
    """Exit the moment the main process is gone (its end of the pipe closes)."""

    def watch() -> None:
        try:
            os.read(fd, 1)
        except OSError:
            pass
        os._exit(0)

    threading.Thread(target=watch, name="dataloader-parent-watch", daemon=True).start()


class WorkerLoop:
    """The worker's state. ``local``: a thread worker, whose batches are handed over as objects."""

    def __init__(self, boot: WorkerBoot, conn: Any, local: bool = False) -> None:
        self.boot = boot
        self.conn = conn
        self.local = local
        self.pid = os.getpid()
        # Thread workers share the process's global random state, so only
        # batch_rng() is seeded for them (per thread); so it is where seeding="worker" seeds
        # the global generators once, in start().
        self.maker = BatchMaker(
            boot.dataset, boot.transform, boot.collator, boot.seed,
            # per batch (7 us): its draws do not depend on the worker
            seed_globals=not local and boot.seed_per_batch,
            watch_global_draws=boot.watch_global_draws,
            policy=replace(boot.policy, worker=boot.worker_id), hooks=boot.hooks,
        )
        self.pool = SegmentPool(boot.shm_budget, boot.name, self._announce, self._retire)
        # Work read ahead of its turn while looking for releases: tasks, or other messages.
        self.pending: collections.deque = collections.deque()
        # Whether a message waits, without building a selector per check as conn.poll() does.
        self._incoming = select.poll()
        self._incoming.register(conn.fileno(), select.POLLIN)
        self.expected = 0  # bytes of the largest shared batch so far: the next arena's size
        self.heard = 0  # messages read that freed segments (see WaitingForRoom.heard)
        self.skeletons = SkeletonNames()  # batch structures already described to the main process
        self._replies: list | None = None  # answers held for one Replies while running a RunTasks
        self.shard = (
            ShardReader(
                boot.dataset, boot.stream_batch_size, boot.restart_stream,
                seed=boot.seed if boot.seed_per_batch and not local else None,
                worker=boot.worker_id, workers=boot.num_workers,
            )
            if boot.stream_batch_size is not None
            else None
        )

    def start(self) -> None:
        """Set up this worker, then say so; a failure is sent home (:class:`InitFailed`)."""
        boot = self.boot
        stage = "start-up"
        try:
            # Seeds are 64-bit (torch refuses more): the last workers of a seed near 2**64 wrap.
            seed = (boot.seed + boot.worker_id) % 2**64
            set_worker_info(WorkerInfo(boot.worker_id, boot.num_workers, seed, boot.dataset))
            if not self.local:
                seed_all(seed)
            if boot.worker_init_fn is not None:
                stage = "worker_init_fn"
                boot.worker_init_fn(boot.worker_id)
        except BaseException as error:  # KeyboardInterrupt, SystemExit too: the user gets it whole
            self.conn.send(InitFailed(self._capture(error, None, stage)))
            raise StopWorker from error
        self.conn.send(Started(boot.worker_id, self.pid))

    def serve(self) -> None:
        while True:
            work = self.pending.popleft() if self.pending else self._free(self.conn.recv())[1]
            if isinstance(work, BatchTask):
                self._run(work)
            elif isinstance(work, tuple):
                self._run_all(work)
            elif isinstance(work, Shutdown):
                return
            # None (the message only freed segments) or a late Overflow (the room came first).

    def _run_all(self, tasks: tuple[BatchTask, ...]) -> None:
        """Make the tasks of one :class:`RunTasks` and answer them in one :class:`Replies`."""
        self._replies = []
        try:
            for task in tasks:
                self._run(task)
        finally:
            self._send_replies()
            self._replies = None

    def _reply(self, message: Any) -> None:
        """Answer a task: at once, or with the rest of its :class:`RunTasks`."""
        if self._replies is None:
            self._send(message)
        else:
            self._replies.append(message)

    def _send_replies(self) -> None:
        """Send the answers held so far (before blocking, the main process may need them)."""
        if self._replies:
            try:
                self.conn.send(Replies(tuple(self._replies)))
            except MemoryError:  # one of them is a batch too large to copy: each on its own
                for message in self._replies:
                    self._send(message)
            self._replies.clear()

    def _send(self, message: Any) -> None:
        """Send ``message``. A batch travelling inline whose pickled copy finds no memory (under
        ulimit -v, its segment could not be mapped either) is answered with the error instead:
        nothing was written yet, and the worker lives on."""
        try:
            self.conn.send(message)
        except MemoryError as error:
            if type(message) is not BatchDone:
                raise
            limited = unsendable(message.payload.nbytes)
            try:  # raised, so that the captured error carries its message and traceback
                if limited is None:
                    raise
                raise limited from error
            except Exception as failure:
                captured = self._capture(failure, None, "transport")
            self.conn.send(BatchFailed(message.epoch, message.index, captured, recoverable=False))

    def _run(self, task: BatchTask) -> None:
        if self.local:
            return self._run_local(task)
        allocator = None
        try:
            allocator = self._arena()
            with use_allocator(allocator) if allocator is not None else nullcontext():
                batch = self._make(task)
            if batch is _ENDED or batch is LEFT_OUT:
                self._give_back(allocator)
                self._reply_unmade(task, batch)
                return
            self.maker.mark_stage("transport")
            meta, raws = split(batch, self.skeletons)
            del batch
        except BaseException as error:  # not only Exception: see the module's docstring
            self._give_back(allocator)
            self._reply_failed(task, error, self.maker.stage)
            return
        try:
            if (allocator is None or allocator.segment is None) and not fits_inline(raws):
                self._absorb_releases()  # pack will take a segment: reuse a released one
            payload = pack(meta, raws, self.pool, allocator)
            while payload is None:
                payload = self._wait_for_room(meta, raws, allocator)
        except Exception as error:  # e.g. no memory left for a segment
            self._give_back(allocator)
            self._reply_failed(task, error, "transport")
            return
        if isinstance(payload, SharedBatch):
            self.expected = max(self.expected, payload.nbytes)
        sent = time.perf_counter()
        self._reply(BatchDone(task.epoch, task.index, payload, self.maker.timings, sent, self.maker.failures))

    def _run_local(self, task: BatchTask) -> None:
        try:
            batch = self._make(task)
        except BaseException as error:  # not only Exception: see the module's docstring
            self._reply_failed(task, error, self.maker.stage)
            return
        if batch is _ENDED or batch is LEFT_OUT:
            self._reply_unmade(task, batch)
        else:
            timings = self.maker.timings
            self._reply(BatchDone(task.epoch, task.index, LocalBatch(batch), timings, timings.collated, self.maker.failures))

    def _reply_unmade(self, task: BatchTask, batch: Any) -> None:
        """Answer a task that made no batch: its stream shard ended, or all its samples failed."""
        if batch is _ENDED:
            self._reply(StreamEnded(task.epoch, task.index))
        else:
            self._reply(BatchLeftOut(task.epoch, task.index, self.maker.failures, self.maker.timings))

    def _reply_failed(self, task: BatchTask, error: BaseException, stage: str) -> None:
        """Answer a task with its error; the epoch goes on past it unless it was a part of a
        split batch, the transport's, or not an ``Exception`` (KeyboardInterrupt, SystemExit)."""
        captured = self._capture(error, task.indices, stage)
        recoverable = task.chunk is None and stage != "transport" and isinstance(error, Exception)
        self._reply(BatchFailed(task.epoch, task.index, captured, recoverable=recoverable))

    def _make(self, task: BatchTask) -> Any:
        if self.shard is None:
            return self.maker(task)
        self.maker.mark_stage("fetch")
        start = time.perf_counter()
        samples = self.maker.watched(task, self.shard.read, task.epoch, task.skip)  # a stream's draws
        if samples is None:
            return _ENDED
        seed_index = self.shard.seed_index()
        return self.maker.make_read(task, samples, start, seed_index)  # reading the stream is the fetch

    def _arena(self) -> BumpAllocator | None:
        if not self.expected:
            return None
        return BumpAllocator(acquire=self._take_segment)

    def _take_segment(self) -> Segment | None:
        self._absorb_releases()
        return self.pool.acquire(self.expected)

    def _absorb_releases(self) -> None:
        """Read the messages already here, so segments the user dropped while this worker was
        busy are free before it takes one: otherwise a release queued behind the next task
        makes it create a segment it does not need, and more segments evict each other
        from the CPU's cache. Tasks and the rest keep their order in ``pending``."""
        while self._incoming.poll(0):
            work = self._free(self.conn.recv())[1]
            if work is not None:
                self.pending.append(work)

    def _free(self, message: Any) -> tuple[bool, Any]:
        """Free the segments ``message`` carries (a task's or a :class:`ReleaseSegments`'s).

        Returns whether it freed any, and the work left: a task's :class:`BatchTask`, None
        for a release, any other message as it is. ``pending`` holds work, never messages
        with segments still to free, so a release is never stuck behind the task it rode on.
        """
        if isinstance(message, RunTask):
            return self._release(message.released), message.task
        if isinstance(message, RunTasks):
            return self._release(message.released), message.tasks
        if isinstance(message, ReleaseSegments):
            return self._release(message.segment_ids), None
        return False, message

    def _release(self, segment_ids: tuple[int, ...]) -> bool:
        if not segment_ids:
            return False
        self.heard += 1
        self.pool.release(segment_ids)
        return True

    def _give_back(self, allocator: BumpAllocator | None) -> None:
        if allocator is not None and allocator.segment is not None:
            self.pool.give_back(allocator.segment)

    def _wait_for_room(self, meta: bytes, raws: list, allocator: BumpAllocator | None) -> Any:
        """Block until the user drops a batch, or the main process says to send it inline."""
        self._send_replies()  # the main process may be waiting for one of them
        self.conn.send(
            WaitingForRoom(sum(r.nbytes for r in raws), self.pool.reserved, self.pool.budget, self.heard)
        )
        while True:
            freed, work = self._free(self.conn.recv())
            if isinstance(work, Overflow):
                self._give_back(allocator)
                return inline(meta, raws)
            if isinstance(work, Shutdown):
                raise StopWorker
            if work is not None:
                self.pending.append(work)  # a task waits its turn
            if freed:
                return pack(meta, raws, self.pool, allocator)

    def _announce(self, segment: Segment, fd: int) -> None:
        self.conn.send(SegmentCreated(segment.id, segment.size))
        send_descriptor(self.conn, fd)

    def _retire(self, segment_id: int) -> None:
        self.conn.send(SegmentRetired(segment_id))

    def _capture(self, error: BaseException, indices: Any, stage: str) -> RemoteError:
        return RemoteError.capture(error, self.boot.worker_id, self.pid, listed(indices), stage)


_ENDED = object()

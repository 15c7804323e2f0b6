"""Thread workers: the same worker loop and protocol as processes, in threads.

Messages go through in-process channels (:mod:`.thread_channel`: a deque plus
a pipe whose bytes count the messages, so the executor can wait on it with
the process workers' code): no pickling, no shared memory, batches handed over
as objects. Best when transforms release the GIL (decoding, OpenCV, GPU work).
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from .._local import set_worker_info
from .._transport.receiver import Receiver
from ..errors import WorkerDiedError
from .fork_safety import watch
from .handle import EXIT_GRACE, STOP_GRACE, Handle
from .loop import StopWorker, WorkerBoot, WorkerLoop
from .messages import Shutdown
from .thread_channel import Channel, End, GuardedFd


class _Shared:
    """A worker's channels and exit pipe. The thread closes the exit pipe's writing end when it
    returns (its sentinel); the pool closes everything when it reaps the worker or shuts down,
    even while the thread is stuck in user code (see :mod:`.thread_channel`): a thread that
    returns after that finds its channels closed and ends."""

    def __init__(self) -> None:
        with contextlib.ExitStack() as undo:  # what was made is closed if a later pipe fails
            to_worker = Channel()
            undo.callback(to_worker.close)
            to_main = Channel()
            undo.callback(to_main.close)
            exit_read, exit_write = os.pipe()
            undo.pop_all()
        self.channels = (to_worker, to_main)
        self.exit_read, self.exit_write = GuardedFd(exit_read), GuardedFd(exit_write)

    def close(self) -> None:
        """Close every descriptor (those a call is under way on, as the call leaves)."""
        for channel in self.channels:
            channel.close()
        self.exit_write.close()
        self.exit_read.close()

    def close_in_child(self) -> None:
        """In a process forked from the pool's (see :meth:`ThreadWorkerPool.detach`)."""
        for channel in self.channels:
            channel.close_in_child()
        self.exit_write.close_in_child()
        self.exit_read.close_in_child()


@dataclass(eq=False)
class ThreadHandle(Handle):
    """The executor's view of one thread worker."""

    thread: threading.Thread
    shared: _Shared

    @property
    def pid(self) -> int:
        return os.getpid()

    @property
    def sentinel(self) -> int:
        return self.shared.exit_read.number

    @property
    def label(self) -> str:
        return f"worker {self.id} (thread {self.thread.name})"


class ThreadWorkerPool:
    """``len(boots)`` worker threads running the worker loop."""

    def __init__(self, boots: list[WorkerBoot]) -> None:
        self.receiver = Receiver()
        self._boots = boots
        self.workers: list[ThreadHandle] = []
        self._stopping = False
        self.broken = False
        self._pid = os.getpid()
        self.detached = False  # this process is a fork of the pool's: touch nothing shared
        self.retired: set[int] = set()  # as the process pool's: threads asked to stop (never replaced)
        self.stopped: set[int] = set()  # the same threads: stopped is how a thread is retired
        self._reaped: set[int] = set()  # stopped, returned, and their channels closed
        try:
            for boot in boots:
                self.workers.append(self._start(boot))
        except BaseException:
            self.shutdown()  # the threads started so far, their channels, the receiver
            raise
        watch(self)

    def add_worker(self) -> ThreadHandle:
        """Start one more thread (the autotuner grows the pool): the next id, the first boot."""
        live = len(self.workers) - len(self.retired) + 1
        boot = replace(self._boots[0], worker_id=len(self.workers), num_workers=live)
        handle = self._start(boot)
        self.workers.append(handle)
        return handle

    def stop_worker(self, worker: ThreadHandle) -> None:
        """Ask ``worker``, which has nothing outstanding, to return (the pool shrinks); it gets
        no more work. :meth:`reap` follows its exit."""
        self.retired.add(worker.id)
        self.stopped.add(worker.id)
        try:
            worker.conn.send(Shutdown())
        except OSError:
            pass

    def reap(self, worker: ThreadHandle) -> None:
        """Close the channels of a stopped thread that has returned (or stop waiting for one
        stuck in user code: its channels are closed all the same, and it ends when it returns)."""
        if worker.id in self._reaped:
            return
        self._reaped.add(worker.id)
        worker.thread.join(STOP_GRACE)
        worker.shared.close()

    def _start(self, boot: WorkerBoot) -> ThreadHandle:
        boot = _own_stream(boot)
        shared = _Shared()
        to_worker, to_main = shared.channels
        thread = threading.Thread(
            target=_run_thread_worker,
            args=(boot, End(to_main, to_worker), shared),
            name=f"dataloader-thread-worker-{boot.worker_id}",
            daemon=True,
        )
        try:
            thread.start()
        except BaseException:
            shared.close()
            raise
        return ThreadHandle(boot.worker_id, End(to_worker, to_main), thread, shared)

    def send(self, worker: ThreadHandle, message: Any) -> None:
        try:
            worker.conn.send(message)
        except OSError as error:  # its channel is closed
            self.raise_died(worker, error)

    def receive(self, worker: ThreadHandle) -> Any:
        """The worker's next message; its channel closed: :class:`WorkerDiedError` (the EOF
        itself from a stopped worker), as from a process pool."""
        try:
            return worker.conn.recv()
        except (EOFError, OSError) as error:
            if worker.id in self.stopped:
                raise
            self.raise_died(worker, error)

    def raise_died(self, worker: ThreadHandle, cause: BaseException | None = None) -> NoReturn:
        """Raise :class:`WorkerDiedError` for ``worker``, whose channel closed (``cause``) or
        whose exit pipe fired: it returned or is returning. A thread cannot be killed: it gets
        ``EXIT_GRACE`` seconds to return, and the error says so if it has not."""
        worker.thread.join(EXIT_GRACE)
        self.broken = True
        text = (
            f"DataLoader {worker.label} exited unexpectedly: something in the dataset, transform "
            "or collator raised SystemExit or another BaseException."
        )
        if worker.thread.is_alive():
            text = (
                f"DataLoader {worker.label} stopped answering: its channel to the main thread "
                f"closed ({type(cause).__name__ if cause else 'its exit pipe fired'}), but the "
                f"thread had not returned {EXIT_GRACE:g} s later. Something in the dataset, "
                "transform or collator closed the process's file descriptors, or the thread is "
                "stuck: report it with the traceback."
            )
        error = WorkerDiedError(text)
        error.worker_id, error.pid = worker.id, worker.pid
        raise error from cause

    def stack(self, worker: ThreadHandle, wait: float = 1.0) -> str:
        frame = sys._current_frames().get(worker.thread.ident)
        return "".join(traceback.format_stack(frame)) if frame is not None else ""

    def detach(self) -> None:
        """In a process forked from this one (see :mod:`fork_safety`): the threads are not
        there, and each channel's pipe is shared with the parent's, so a message sent or read
        here would be one the parent's threads miss. Close this process's copies; iterators
        then refuse to run here (the receiver says why), and ``shutdown()`` does nothing."""
        self._stopping = True
        self.broken = True
        self.detached = True
        for worker in self.workers:
            worker.shared.close_in_child()
        self.receiver.detach(self._pid)

    def shutdown(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        running = [worker for worker in self.workers if worker.id not in self._reaped]
        for worker in running:
            if worker.id in self.stopped:
                continue  # told already
            try:
                worker.conn.send(Shutdown())
            except OSError:
                pass
        deadline = time.monotonic() + STOP_GRACE
        for worker in running:
            worker.thread.join(max(0.0, deadline - time.monotonic()))
            worker.shared.close()  # a thread still stuck in user code keeps no descriptor
            self._reaped.add(worker.id)
        self.receiver.close()


def _own_stream(boot: WorkerBoot) -> WorkerBoot:
    """``boot`` with a shallow copy of its stream where the worker reads a stream itself
    (``parallel_stream=True``), as a process worker reads its own copy: a stream keeps where its
    iterator stands in itself (``set_epoch``'s epoch, a ``ParquetStream``'s rows read, a
    ``MixedStream``'s open run), and threads opening one object for different epochs or passes
    would read each other's. What the copy shares (files, arrays, a mix's sources) is opened
    under a lock (:func:`dataloader._shares.open_stream`). A stream that cannot be copied is
    shared as it is."""
    if boot.stream_batch_size is None:
        return boot
    try:
        return replace(boot, dataset=copy.copy(boot.dataset))
    except Exception:  # noqa: BLE001 - a copy refused (its own __reduce__): read the one object
        return boot


def _run_thread_worker(boot: WorkerBoot, conn: End, shared: _Shared) -> None:
    worker = WorkerLoop(boot, conn, local=True)
    try:
        worker.start()
        worker.serve()
    except (StopWorker, EOFError, OSError):
        pass
    finally:
        set_worker_info(None)
        shared.exit_write.close()  # the pool's sentinel fires; the pool closes the rest

"""Thread workers: the same worker loop and protocol as processes, in threads.

Messages go through an in-process channel (a deque plus a pipe whose bytes
count the messages, so the executor can wait on it with the process
workers' code): no pickling, no shared memory, batches handed over as
objects. Best when transforms release the GIL (decoding, OpenCV, GPU work).
"""

from __future__ import annotations

import collections
import os
import select
import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any

from .._transport.receiver import Receiver
from ..errors import WorkerDiedError
from ..worker import _set_worker_info
from .loop import WorkerBoot, _Stop, _Worker
from .messages import Shutdown

_STOP_GRACE = 1.0


class _Channel:
    """One direction of an in-process message channel; ``fileno()`` is readable when a message waits."""

    def __init__(self) -> None:
        self._messages: collections.deque = collections.deque()
        self._read, self._write = os.pipe()
        self.closed = False

    def send(self, message: Any) -> None:
        if self.closed:
            raise BrokenPipeError("the channel is closed")
        self._messages.append(message)
        os.write(self._write, b"\0")

    def recv(self) -> Any:
        if not os.read(self._read, 1):
            raise EOFError
        return self._messages.popleft()

    def poll(self, timeout: float = 0.0) -> bool:
        return bool(select.select([self._read], [], [], timeout)[0])

    def fileno(self) -> int:
        return self._read

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._write)
            os.close(self._read)


class _End:
    """One side of a duplex channel: sends on one, receives on the other."""

    def __init__(self, outgoing: _Channel, incoming: _Channel) -> None:
        self._out = outgoing
        self._in = incoming

    send = property(lambda self: self._out.send)
    recv = property(lambda self: self._in.recv)
    poll = property(lambda self: self._in.poll)
    fileno = property(lambda self: self._in.fileno)


@dataclass(eq=False)
class ThreadHandle:
    """The executor's view of one thread worker (the interface of a process handle)."""

    id: int
    thread: threading.Thread
    conn: _End
    channels: tuple[_Channel, _Channel]
    exit_read: int
    outstanding: dict = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return os.getpid()

    @property
    def sentinel(self) -> int:
        return self.exit_read

    @property
    def label(self) -> str:
        return f"worker {self.id} (thread {self.thread.name})"


class ThreadWorkerPool:
    """``len(boots)`` worker threads running the worker loop."""

    def __init__(self, boots: list[WorkerBoot]) -> None:
        self.receiver = Receiver()
        self.workers = [self._start(boot) for boot in boots]
        self._stopping = False

    def _start(self, boot: WorkerBoot) -> ThreadHandle:
        to_worker, to_main = _Channel(), _Channel()
        exit_read, exit_write = os.pipe()
        thread = threading.Thread(
            target=_run_thread_worker,
            args=(boot, _End(to_main, to_worker), exit_write),
            name=f"dataloader-thread-worker-{boot.worker_id}",
            daemon=True,
        )
        thread.start()
        return ThreadHandle(boot.worker_id, thread, _End(to_worker, to_main), (to_worker, to_main), exit_read)

    def send(self, worker: ThreadHandle, message: Any) -> None:
        worker.conn.send(message)

    def receive(self, worker: ThreadHandle) -> Any:
        return worker.conn.recv()

    def raise_if_dead(self, worker: ThreadHandle) -> None:
        if worker.thread.is_alive():
            return
        raise WorkerDiedError(
            f"DataLoader {worker.label} exited unexpectedly: something in the dataset, transform "
            "or collator raised SystemExit or another BaseException."
        )

    def stack(self, worker: ThreadHandle, wait: float = 1.0) -> str:
        frame = sys._current_frames().get(worker.thread.ident)
        return "".join(traceback.format_stack(frame)) if frame is not None else ""

    def shutdown(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        for worker in self.workers:
            try:
                worker.conn.send(Shutdown())
            except OSError:
                pass
        for worker in self.workers:
            worker.thread.join(_STOP_GRACE)
            if not worker.thread.is_alive():
                for channel in worker.channels:
                    channel.close()
                os.close(worker.exit_read)
            # A thread stuck inside user code cannot be stopped; it is a daemon and
            # keeps its channel until it returns.
        self.receiver.close()


def _run_thread_worker(boot: WorkerBoot, conn: _End, exit_write: int) -> None:
    worker = _Worker(boot, conn, local=True)
    try:
        worker.start()
        worker.serve()
    except (_Stop, EOFError, OSError):
        pass
    finally:
        _set_worker_info(None)
        os.close(exit_write)

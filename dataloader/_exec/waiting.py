"""Waiting: one ``poll`` over every worker's socket and exit, the receiver's wake-up pipe, and
the epoch's own wake-up pipe.

One call notices whichever comes first: a message, a worker's exit, the user dropping a batch,
or another thread closing the epoch. There is no polling loop and no ``sleep``.
"""

from __future__ import annotations

import math
import os
import select
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._workers.handle import Handle
    from .._workers.pool import WorkerPool
    from .._workers.threads import ThreadWorkerPool
    from .inbox import Inbox
    from .overflow import OverflowGrants
    from .releases import Releases


def _poller(*fds: int) -> "select.poll":
    """A ``poll`` object watching ``fds`` for input, built once and reused for every wait."""
    watch = select.poll()
    for fd in fds:
        watch.register(fd, select.POLLIN)
    return watch


class _WakeUp:
    """A pipe whose read end the epoch's ``poll`` watches: another thread that closes the epoch
    writes to it, and the wait returns at once. Its descriptors close with it."""

    def __init__(self) -> None:
        self.fd = self._write = -1  # what close() sees where os.pipe() fails (ulimit -n)
        self.fd, self._write = os.pipe()
        os.set_blocking(self._write, False)

    def set(self) -> None:
        try:
            os.write(self._write, b"\0")
        except OSError:  # already written (the pipe is full) or closed: the wait has returned
            pass

    def close(self) -> None:
        if self._write >= 0:
            os.close(self.fd)
            os.close(self._write)
            self.fd = self._write = -1

    def __del__(self) -> None:
        self.close()


class Waiter:
    """Blocks until a worker speaks or exits, or the user drops a batch, and handles what came.

    What it watches is registered once per epoch, not once per wait as
    ``multiprocessing.connection.wait`` does.
    """

    def __init__(
        self,
        pool: WorkerPool | ThreadWorkerPool,
        inbox: Inbox,
        releases: Releases,
        overflow: OverflowGrants,
    ) -> None:
        self._pool = pool
        self._receiver = pool.receiver
        self._inbox = inbox
        self._releases = releases
        self._overflow = overflow
        self._watched: dict[int, tuple[str, Handle | None]] = {}
        retired = pool.retired
        live = [worker for worker in pool.workers if worker.id not in retired]
        for worker in live:
            self._watched[worker.conn.fileno()] = ("message", worker)
            self._watched[worker.sentinel] = ("exit", worker)
        self._watched[pool.receiver.wakeup_fd] = ("release", None)
        self._wakeup = _WakeUp()
        self._watched[self._wakeup.fd] = ("stop", None)
        self._poller = _poller(*self._watched)
        self._has_message = {worker.id: _poller(worker.conn.fileno()) for worker in live}
        self._writing: set[int] = set()  # workers' sockets also watched for room (see _watch_unsent)

    def wait(self, deadline: float | None) -> bool:
        """Wait until something happens or ``deadline`` (``time.monotonic()``; None: no limit)
        passes, and handle it; False if nothing happened. Before blocking, pending releases
        are sent and workers waiting for room are granted ``Overflow``."""
        # A batch already here is handled without sending the releases first: its task takes them.
        if self._releases.pending and self._handle(self._poller.poll(0)):
            return True
        receiver = self._receiver
        receiver.sleeping = True  # before reading the queue: a drop from now on wakes the poll
        try:
            self._releases.collect()
            self._releases.send_all()
            self._overflow.grant()
            self._watch_unsent()
            timeout = None if deadline is None else max(0, math.ceil((deadline - time.monotonic()) * 1000))
            ready = self._poller.poll(timeout)
        finally:
            receiver.sleeping = False
        return self._handle(ready)

    def replace_worker(self, dead: Handle, new: Handle) -> None:
        """Stop watching ``dead`` (its last words were read) and watch ``new`` instead."""
        self.unwatch(dead)
        self.watch(new)

    def watch(self, worker: Handle) -> None:
        """Watch ``worker`` too (a new one: a replacement, or a larger pool)."""
        self._watched[worker.conn.fileno()] = ("message", worker)
        self._watched[worker.sentinel] = ("exit", worker)
        self._poller.register(worker.conn.fileno(), select.POLLIN)
        self._poller.register(worker.sentinel, select.POLLIN)
        self._has_message[worker.id] = _poller(worker.conn.fileno())

    def unwatch(self, worker: Handle) -> None:
        """Stop watching ``worker`` (dead, or stopped and exited)."""
        for fd in (worker.conn.fileno(), worker.sentinel):
            self._watched.pop(fd, None)
            self._writing.discard(fd)
            try:
                self._poller.unregister(fd)
            except KeyError:
                pass
        self._has_message.pop(worker.id, None)

    def wake(self) -> None:
        """Make a ``wait()`` in another thread return now (the epoch is being closed)."""
        if self._pool.detached:  # a forked child: the pipe is shared with the parent's waiting thread
            return
        self._wakeup.set()

    def close(self) -> None:
        """Close the wake-up pipe; called once no thread waits any more."""
        self._wakeup.close()

    def drain(self, worker: Handle, readable: bool = False) -> None:
        """Handle every message waiting from ``worker`` (``readable``: its socket polled so).
        Its channel closed: the pool raises :class:`~dataloader.WorkerDiedError`."""
        has_message = self._has_message[worker.id]
        while readable or has_message.poll(0):
            readable = False
            self._inbox.handle(worker, self._pool.receive(worker))

    def _watch_unsent(self) -> None:
        """Watch for room the sockets of the workers whose messages wait to be written (the
        main process never blocks sending; see :class:`~dataloader._workers.wire.Wire`), and
        stop watching those whose messages are all written."""
        retired = self._pool.retired
        for worker in self._pool.workers:
            if worker.id in retired:
                continue  # dead and replaced: what waited for it is moot
            if worker.conn.unsent or (self._writing and worker.conn.fileno() in self._writing):
                self._flush(worker)

    def _flush(self, worker: Handle) -> None:
        """Write what waits for ``worker``, as far as its socket takes it now; watch the socket
        for room while something still waits."""
        conn, fd = worker.conn, worker.conn.fileno()
        try:
            waiting = conn.unsent and not conn.flush()
        except OSError as error:  # a broken pipe, a reset: its end is closed
            self._pool.raise_died(worker, error)
        if waiting != (fd in self._writing):
            self._poller.modify(fd, select.POLLIN | select.POLLOUT if waiting else select.POLLIN)
            self._writing.symmetric_difference_update((fd,))

    def _handle(self, ready: list[tuple[int, int]]) -> bool:
        """Handle what ``poll`` found ready; False if nothing was. A worker that exited is
        drained first (it may have sent an error just before), then reported dead."""
        exits = []
        for fd, events in ready:
            entry = self._watched.get(fd)
            if entry is None:
                continue  # a stopped worker's socket, closed earlier in this round
            kind, worker = entry
            if worker is not None and worker.id in self._pool.stopped:
                if kind == "exit":
                    exits.append(worker)
                elif fd in self._watched:
                    self._last_words(worker)
            elif kind == "message":
                if events & select.POLLOUT:
                    self._flush(worker)
                if events & ~select.POLLOUT:  # a message, or the worker's end closed
                    self.drain(worker, readable=True)
            elif kind == "exit":
                exits.append(worker)
            elif kind == "release":
                self._releases.collect()
            # "stop": the executor sees that it is stopping as soon as this wait returns
        for worker in exits:
            if worker.id in self._pool.stopped:
                self._reap(worker)
                continue
            self.drain(worker)
            self._pool.raise_died(worker)  # its sentinel fired: exited, or closed it and going
        return bool(ready)

    def _last_words(self, worker: Handle) -> None:
        """Read what a worker asked to stop still says (a segment retired) until its end
        closes; then stop watching its socket (its exit, :meth:`_reap`, comes next)."""
        has_message = self._has_message.get(worker.id)
        try:
            while has_message is not None and has_message.poll(0):
                self._inbox.handle(worker, self._pool.receive(worker))
        except (EOFError, OSError):
            fd = worker.conn.fileno()
            self._watched.pop(fd, None)
            self._writing.discard(fd)
            self._has_message.pop(worker.id, None)
            self._poller.unregister(fd)

    def _reap(self, worker: Handle) -> None:
        """A worker asked to stop has exited: read its last words, and let the pool release it."""
        if worker.conn.fileno() in self._watched:
            self._last_words(worker)
        self.unwatch(worker)
        self._pool.reap(worker)

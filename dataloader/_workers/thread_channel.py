"""The in-process channels of thread workers, which the pool can close while a thread still holds them.

A thread stuck in user code cannot be stopped, so the pool closes its channels at shutdown rather
than leave six descriptors per closed loader open until the thread returns, if ever. The thread
may touch them later (to send its late result, or to read its next task), and by then the numbers
may belong to a file opened since. So each descriptor is a :class:`GuardedFd`: a call on it
starts only while it is open, and closing it waits for no call but makes the last call under way
close it as it leaves. Such a call can be a blocked read of an empty channel; closing the
channel's other end first ends it with an EOF. A call made after the close raises
:class:`BrokenPipeError` (sending) or :class:`EOFError` (receiving), which ends the worker loop.
"""

from __future__ import annotations

import collections
import errno
import os
import select
import threading
from typing import Any

from .exits import ready_within


class GuardedFd:
    """A descriptor that is closed once, and never while a call on it is under way."""

    __slots__ = ("number", "closed", "_lock", "_users")

    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False
        self._lock = threading.Lock()
        self._users = 0

    def enter(self) -> int | None:
        """The number to make one call with (pair with :meth:`leave`); None once closed."""
        with self._lock:
            if self.closed:
                return None
            self._users += 1
            return self.number

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            last = self.closed and not self._users
        if last:
            os.close(self.number)

    def close(self) -> None:
        """Close it now, or as the call under way leaves; a second close does nothing."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            idle = not self._users
        if idle:
            os.close(self.number)

    def close_in_child(self) -> None:
        """In a process forked from the pool's: no call is under way here (the threads that made
        them were not copied, and a lock they held would stay held), so close this copy at once."""
        self._lock = threading.Lock()
        if not self.closed:
            self.closed = True
            os.close(self.number)


class Channel:
    """One direction of an in-process message channel: a deque, and a pipe whose bytes count the
    messages, so that ``fileno()`` is readable when one waits (the executor polls it with the
    process workers' code)."""

    def __init__(self) -> None:
        self._messages: collections.deque = collections.deque()
        read, write = os.pipe()
        self._read, self._write = GuardedFd(read), GuardedFd(write)

    @property
    def closed(self) -> bool:
        return self._read.closed

    def send(self, message: Any) -> None:
        fd = self._write.enter()
        if fd is None:
            raise BrokenPipeError(errno.EPIPE, "the channel is closed")
        try:
            self._messages.append(message)
            os.write(fd, b"\0")
        finally:
            self._write.leave()

    def recv(self) -> Any:
        fd = self._read.enter()
        if fd is None:
            raise EOFError("the channel is closed")
        try:
            if not os.read(fd, 1):
                raise EOFError("the channel is closed")
            return self._messages.popleft()
        finally:
            self._read.leave()

    def poll(self, timeout: float = 0.0) -> bool:
        """Whether a message waits (or the channel is closed: :meth:`recv` then says so)."""
        fd = self._read.enter()
        if fd is None:
            return True
        try:
            return ready_within(fd, select.POLLIN, timeout)
        finally:
            self._read.leave()

    def fileno(self) -> int:
        return self._read.number

    def close(self) -> None:
        """Close both ends: the writing end first, so that a read blocked on the other ends."""
        self._write.close()
        self._read.close()

    def close_in_child(self) -> None:
        self._write.close_in_child()
        self._read.close_in_child()


class End:
    """One side of a duplex channel: sends on one, receives on the other."""

    def __init__(self, outgoing: Channel, incoming: Channel) -> None:
        self._out = outgoing
        self._in = incoming

    send = property(lambda self: self._out.send)
    recv = property(lambda self: self._in.recv)
    poll = property(lambda self: self._in.poll)
    fileno = property(lambda self: self._in.fileno)
    unsent = False  # a send never waits (see Wire.unsent)

    def flush(self) -> bool:
        return True

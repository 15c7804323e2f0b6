"""Closing a stage while another thread is inside its ``next()``: :class:`Occupancy`.

An executor's ``next()`` waits for workers (in ``poll``) or runs your code (serial mode) in one
thread, while another thread may close it: the consumer's thread closing a buffer or preload
stage whose thread is inside the executor, or your code calling ``close()`` from a thread of
its own. Tearing the executor down under that thread would close the sockets it polls and stop
the pool in the middle of its work. So the closer asks instead: it marks the stage
``stopping``, wakes the thread inside (the executor's wake-up pipe), waits for it to leave, and
then tears down. A thread that has not left after :data:`LEAVE_WITHIN` is running your code,
which nothing can interrupt: it tears down itself as it leaves.

``next()`` from two threads at once is served one call at a time.
"""

from __future__ import annotations

import threading
from typing import Callable

LEAVE_WITHIN = 1.0  # seconds a closer waits for the thread inside to leave


class Stopped(Exception):
    """Raised inside ``next()`` when another thread closes the stage; the loader's iterator
    turns it into the error that says why."""


class Occupancy:
    """Which thread is inside a stage's ``next()``, so that ``close()`` from another thread is safe.

    ``enter()`` and ``leave()`` bracket ``next()``; ``close(teardown, wake)`` runs ``teardown``
    exactly once, never while another thread is inside.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._inside: int | None = None
        self._closing = False
        self._left_to_inside: Callable[[], None] | None = None
        self._waiting = 0  # threads waiting on the condition: leave() wakes them only if any

    @property
    def stopping(self) -> bool:
        """Closed or being closed: the thread inside must return (raise :class:`Stopped`)."""
        return self._closing

    def enter(self) -> bool:
        """Start a ``next()``: False when the stage is closed or closing. A call from a second
        thread waits until the first has left."""
        with self._lock:  # the plain lock: a next() at a time is the rule, waiting the exception
            if self._inside is not None and not self._closing:
                self._wait_until(lambda: self._inside is None or self._closing)
            if self._closing:
                return False
            self._inside = threading.get_ident()
            return True

    def leave(self) -> None:
        """End a ``next()``; run the teardown a closer left to this thread, if any."""
        with self._lock:
            self._inside = None
            teardown, self._left_to_inside = self._left_to_inside, None
            if self._waiting:
                self._condition.notify_all()
        if teardown is not None:
            teardown()

    def close(self, teardown: Callable[[], None], wake: Callable[[], None]) -> None:
        """Run ``teardown`` once: at once if no other thread is inside; else after ``wake()``
        made it leave (within :data:`LEAVE_WITHIN`), or, failing that, when it leaves."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            inside = self._inside
            self._condition.notify_all()  # a second caller waiting in enter() gives up
        if inside is not None and inside != threading.get_ident():
            wake()
            with self._lock:
                if not self._wait_until(lambda: self._inside is None, LEAVE_WITHIN):
                    self._left_to_inside = teardown
                    return
        teardown()

    def _wait_until(self, ready: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait on the condition (its lock held) until ``ready()``, or ``timeout`` seconds;
        counted in ``_waiting``, so that :meth:`leave` knows to wake this thread."""
        self._waiting += 1
        try:
            return self._condition.wait_for(ready, timeout)
        finally:
            self._waiting -= 1

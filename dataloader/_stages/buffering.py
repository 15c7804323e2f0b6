"""Iterate anything in a background thread: :class:`ThreadBuffer`, :func:`buffer_iterator`.

The thread runs ahead of the consumer by ``buffer_size`` items. Producer and
consumer block on one condition variable (no polling); stopping always joins
the thread, and an exception in the source reaches the consumer with its
traceback. ``repeats`` hands each item out that many times (data echoing).
"""

from __future__ import annotations

import collections
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

from ._validate import check_non_negative_number, check_positive_int
from .errors import LoaderTimeoutError

_END = object()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class BufferedIterator:
    """One pass of a background-thread buffer over ``source``.

    ``convert`` runs in the background thread on each item (the preload stage
    uses it for device copies). ``on_stuck`` is called by :meth:`close` when
    the thread does not stop by itself (it is blocked inside the source); it
    should make the source return, e.g. by shutting its workers down.
    """

    def __init__(
        self,
        source: Iterable,
        buffer_size: int = 1,
        timeout: float | None = None,
        repeats: int = 1,
        convert: Callable[[Any], Any] | None = None,
        on_stuck: Callable[[], None] | None = None,
        name: str = "dataloader-buffer",
        gated: bool = False,
        timeout_message: str | None = None,
    ) -> None:
        self._source = source
        self._size = buffer_size
        self._timeout = timeout
        self._timeout_message = timeout_message
        self._repeats = repeats
        self._convert = convert
        self._on_stuck = on_stuck
        self._items: collections.deque = collections.deque()
        self._condition = threading.Condition()
        self._stopped = False
        # Gated: the thread works ahead only inside allow_buffering(); otherwise
        # it makes exactly the items the consumer asks for.
        self._gated = gated
        self._allowed = 0
        self._demand = 0
        self._current: Any = _END
        self._left = 0
        self._thread = threading.Thread(target=self._produce, name=name, daemon=True)
        self._thread.start()

    def _produce(self) -> None:
        try:
            if not self._may_produce():
                return
            for item in self._source:
                if self._convert is not None:
                    item = self._convert(item)
                if not self._put(item) or not self._may_produce():
                    return
            self._put(_END)
        except BaseException as error:  # handed to the consumer, which re-raises it
            self._put(_Failure(error))

    def _may_produce(self) -> bool:
        """Block until the next item may be made (room in the buffer, and allowed or asked for)."""
        with self._condition:
            while not self._stopped and (
                len(self._items) >= self._size or (self._gated and not self._allowed and not self._demand)
            ):
                self._condition.wait()
            return not self._stopped

    def _put(self, item: Any) -> bool:
        with self._condition:
            if self._stopped:
                return False
            self._items.append(item)
            self._demand = 0
            self._condition.notify_all()
            return True

    @contextmanager
    def allow_buffering(self) -> Iterator[None]:
        """Let the thread work ahead while the block runs (only matters when gated)."""
        with self._condition:
            self._allowed += 1
            self._condition.notify_all()
        try:
            yield
        finally:
            with self._condition:
                self._allowed -= 1

    def __iter__(self) -> "BufferedIterator":
        return self

    def __next__(self) -> Any:
        if self._left > 0:
            self._left -= 1
            return self._current
        item = self._get()
        if item is _END:
            with self._condition:
                self._items.appendleft(_END)  # later calls end too
            raise StopIteration
        if isinstance(item, _Failure):
            raise item.error
        self._current, self._left = item, self._repeats - 1
        return item

    def _get(self) -> Any:
        with self._condition:
            deadline = None if not self._timeout else time.monotonic() + self._timeout
            if not self._items and self._gated and not self._allowed:
                self._demand = 1
                self._condition.notify_all()
            while not self._items:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise LoaderTimeoutError(
                        self._timeout_message
                        or f"buffer timeout: the source produced nothing within {self._timeout:g} s."
                    )
                self._condition.wait(remaining)
            item = self._items.popleft()
            self._condition.notify_all()
            return item

    def close(self) -> None:
        """Stop the thread and join it; idempotent."""
        with self._condition:
            self._stopped = True
            self._items.clear()
            self._current = None
            self._condition.notify_all()
        self._thread.join(0.2)
        if self._thread.is_alive() and self._on_stuck is not None:
            self._on_stuck()
            self._thread.join(2.0)
        # Otherwise a thread still inside the source cannot be interrupted: it is a
        # daemon, and exits at its next item.

    def __del__(self) -> None:
        if not self._stopped:
            try:
                self.close()
            except Exception:
                pass


class ThreadBuffer:
    """Iterating it iterates ``source`` in a background thread, ``buffer_size`` items ahead.

    Each ``iter()`` starts a new pass (and thread). MONAI's ``ThreadBuffer``
    under the same name; ``timeout`` None waits forever.
    """

    def __init__(self, source: Iterable, buffer_size: int = 1, timeout: float | None = None, repeats: int = 1) -> None:
        self.source = source
        self.buffer_size = check_positive_int("buffer_size", buffer_size)
        self.timeout = None if timeout is None else check_non_negative_number("timeout", timeout)
        self.repeats = check_positive_int("repeats", repeats)

    def __iter__(self) -> BufferedIterator:
        return BufferedIterator(self.source, self.buffer_size, self.timeout, self.repeats)


def buffer_iterator(
    source: Iterable, buffer_size: int = 1, timeout: float | None = None, repeats: int = 1
) -> Iterator:
    """A generator over ``source`` buffered in a background thread; closing it joins the thread."""
    iterator = iter(ThreadBuffer(source, buffer_size, timeout, repeats))
    try:
        yield from iterator
    finally:
        iterator.close()

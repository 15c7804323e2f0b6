"""Running upstream ahead in a background thread: :class:`BufferedIterator`, :class:`Buffered`.

The thread runs ahead of the consumer by ``buffer_size`` items. Producer and
consumer block on one condition variable (no polling); stopping always joins
the thread, and an exception in the source reaches the consumer with its
traceback. The loader's buffer and preload stages, the stream timeout and the
public :class:`~dataloader.ThreadBuffer` are all built on it.
"""

from __future__ import annotations

import collections
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

from .._failure import Failure
from ..errors import LoaderTimeoutError
from .stage import Stage

_END = object()


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
            self._put(Failure(error))

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
        item = self._get()
        if item is _END:
            with self._condition:
                self._items.appendleft(_END)  # later calls end too
            raise StopIteration
        if isinstance(item, Failure):
            raise item.error
        return item

    def _get(self) -> Any:
        with self._condition:
            deadline = None if not self._timeout else time.monotonic() + self._timeout
            if not self._items and self._gated and not self._allowed:
                self._demand = 1
                self._condition.notify_all()
            while not self._items:
                if self._stopped:  # closed, maybe by another thread while this call waited
                    raise StopIteration
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


class Buffered(Stage):
    """The loader's buffer stage: ``upstream`` runs ``size`` batches ahead in a background thread.

    With ``on_request``, the thread works ahead only inside
    :meth:`allow_buffering` blocks and otherwise makes just the batch asked for.
    """

    def __init__(self, upstream: Any, size: int, on_request: bool) -> None:
        super().__init__(upstream)
        self._buffer = BufferedIterator(
            upstream, buffer_size=size, on_stuck=upstream.close, name="dataloader-buffer", gated=on_request
        )
        self.allow_buffering = self._buffer.allow_buffering

    def __next__(self) -> Any:
        return next(self._buffer)

    def _release(self) -> None:
        self._buffer.close()

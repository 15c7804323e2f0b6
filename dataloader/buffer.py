"""Iterate anything in a background thread: :class:`ThreadBuffer`, :func:`buffer_iterator`.

The thread runs ahead of the consumer by ``buffer_size`` items; an exception
in the source reaches the consumer with its traceback, and closing joins the
thread. ``repeats`` hands each item out that many times (data echoing). The
same machinery runs the loader's ``buffer_size`` and ``repeats`` options.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from ._stages.buffering import BufferedIterator
from ._stages.consumer import Echo
from ._validate import check_positive_int, check_timeout

__all__ = ["BufferedIterator", "ThreadBuffer", "buffer_iterator"]


class ThreadBuffer:
    """Iterating it iterates ``source`` in a background thread, ``buffer_size`` items ahead.

    Each ``iter()`` starts a new pass (and thread). MONAI's ``ThreadBuffer``
    under the same name; ``timeout`` None waits forever.
    """

    def __init__(self, source: Iterable[Any], buffer_size: int = 1, timeout: float | None = None, repeats: int = 1) -> None:
        self.source = source
        self.buffer_size = check_positive_int("buffer_size", buffer_size)
        self.timeout = None if timeout is None else check_timeout("timeout", timeout)
        self.repeats = check_positive_int("repeats", repeats)

    def __iter__(self) -> Any:
        """A closable iterator: a :class:`BufferedIterator`, echoed when ``repeats > 1``."""
        iterator = BufferedIterator(self.source, self.buffer_size, self.timeout)
        return iterator if self.repeats == 1 else Echo(iterator, self.repeats)


def buffer_iterator(
    source: Iterable[Any], buffer_size: int = 1, timeout: float | None = None, repeats: int = 1
) -> Iterator[Any]:
    """A generator over ``source`` buffered in a background thread; closing it joins the thread."""
    iterator = iter(ThreadBuffer(source, buffer_size, timeout, repeats))
    try:
        yield from iterator
    finally:
        iterator.close()

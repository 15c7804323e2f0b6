"""What ``iter(loader)`` returns: one epoch, closable, a context manager."""

from __future__ import annotations

from typing import Any


class LoaderIterator:
    """One epoch of batches.

    ``close()`` (or leaving a ``with`` block, or garbage collection) stops the
    epoch's workers and threads and frees its shared memory; it is idempotent.
    """

    def __init__(self, executor: Any, length: int | None) -> None:
        self._executor = executor
        self._length = length
        self._closed = False

    def __iter__(self) -> "LoaderIterator":
        return self

    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        try:
            return next(self._executor)
        except StopIteration:
            self.close()
            raise
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        if self._length is None:
            raise TypeError("this epoch reads a stream: its length is unknown")
        return self._length

    def close(self) -> None:
        """Stop this epoch and release what it holds."""
        if self._closed:
            return
        self._closed = True
        self._executor.close()

    def __enter__(self) -> "LoaderIterator":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

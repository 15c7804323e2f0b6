"""What ``iter(loader)`` returns: one epoch, closable, a context manager."""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from time import perf_counter
from typing import Any, Iterator

from .._stages.stage import Stage
from ..monitor import Recorder, Stats


class LoaderIterator(Stage):
    """One epoch of batches.

    ``close()`` (or leaving a ``with`` block, or garbage collection) stops the
    epoch's workers and threads and frees its shared memory; it is idempotent.
    ``buffer`` is the epoch's buffer stage, if any, for :meth:`allow_buffering`.
    """

    def __init__(self, stages: Any, length: int | None, recorder: Recorder | None = None, buffer: Any = None) -> None:
        super().__init__(stages)
        self._length = length
        self._buffer = buffer
        self.recorder = recorder or Recorder(0)

    def __next__(self) -> Any:
        if self.closed:
            raise StopIteration
        start = perf_counter()
        try:
            batch = next(self.upstream)
            self.recorder.waited(start, perf_counter())
            return batch
        except BaseException:  # the end of the epoch (StopIteration) or any failure
            self.close()
            raise

    def __len__(self) -> int:
        if self._length is None:
            raise TypeError("this epoch reads a stream: its length is unknown")
        return self._length

    def close(self) -> None:
        """Stop this epoch and release what it holds."""
        if self.closed:
            return
        try:
            super().close()
        finally:
            self.recorder.finish()

    @contextmanager
    def allow_buffering(self) -> Iterator[None]:
        """Let the buffer work ahead inside the block (``buffer_on_request=True``).

        Use it around a step that releases the GIL (a native call, a GPU
        kernel) so that buffering happens while the step cannot use the CPU.
        """
        with self._buffer.allow_buffering() if self._buffer is not None else nullcontext():
            yield

    def stats(self) -> Stats:
        """Timings of this epoch so far, with a verdict on the bottleneck."""
        return self.recorder.snapshot()

    def __enter__(self) -> "LoaderIterator":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

"""Preload: batch k+1 is made and copied to the device while the consumer works on batch k.

Upstream (the executor) and the adapter's ``convert`` run in a background
thread, ``depth`` batches ahead; the adapter's ``ready`` runs in the
consumer's thread. Without preload the pipeline converts inline instead
(a plain consumer stage).
"""

from __future__ import annotations

from typing import Any

from time import perf_counter

from ..buffer import BufferedIterator
from ..monitor import Recorder
from .adapters import Adapter


class Preload:
    """An iterator over ``upstream``'s batches, converted by ``adapter`` ahead of time."""

    def __init__(self, upstream: Any, adapter: Adapter, depth: int, recorder: Recorder | None = None) -> None:
        self.upstream = upstream
        self._adapter = adapter
        self._recorder = recorder
        self._buffer = BufferedIterator(
            upstream,
            buffer_size=depth,
            convert=self._convert,
            on_stuck=upstream.close,
            name="dataloader-preload",
        )

    def __iter__(self) -> "Preload":
        return self

    def __next__(self) -> Any:
        return self._adapter.ready(next(self._buffer))

    def _convert(self, batch: Any) -> Any:
        start = perf_counter()
        batch = self._adapter.convert(batch)
        if self._recorder is not None:
            self._recorder.preloaded(start, perf_counter())
        return batch

    def close(self) -> None:
        self._buffer.close()
        self.upstream.close()


class Buffered:
    """Buffered mode: ``upstream`` runs ``size`` batches ahead in a background thread.

    With ``on_request``, the thread works ahead only inside
    :meth:`allow_buffering` blocks and otherwise makes just the batch asked for.
    """

    def __init__(self, upstream: Any, size: int, on_request: bool) -> None:
        self.upstream = upstream
        self._buffer = BufferedIterator(
            upstream, buffer_size=size, on_stuck=upstream.close, name="dataloader-buffer", gated=on_request
        )
        self.allow_buffering = self._buffer.allow_buffering

    def __iter__(self) -> "Buffered":
        return self

    def __next__(self) -> Any:
        return next(self._buffer)

    def close(self) -> None:
        self._buffer.close()
        self.upstream.close()

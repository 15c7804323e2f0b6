"""Preload: batch k+1 is made and copied to the device while the consumer works on batch k.

Upstream (the executor) and the adapter's ``convert`` run in a background
thread, ``depth`` batches ahead; the adapter's ``ready`` runs in the
consumer's thread. Without preload the pipeline converts inline instead
(a plain consumer stage).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from .._failure import Unmade
from .._stages.buffering import BufferedIterator
from .._stages.stage import Stage
from ..monitor import Recorder
from .adapters import Adapter


class Preload(Stage):
    """An iterator over ``upstream``'s batches, converted by ``adapter`` ahead of time."""

    def __init__(self, upstream: Any, adapter: Adapter, depth: int, recorder: Recorder | None = None) -> None:
        super().__init__(upstream)
        self._adapter = adapter
        self._recorder = recorder
        self._buffer = BufferedIterator(
            upstream,
            buffer_size=depth,
            convert=self._convert,
            on_stuck=upstream.close,
            name="dataloader-preload",
        )

    def __next__(self) -> Any:
        batch = next(self._buffer)
        return batch if type(batch) is Unmade else self._adapter.ready(batch)

    def _convert(self, batch: Any) -> Any:
        if type(batch) is Unmade:
            return batch
        start = perf_counter()
        batch = self._adapter.convert(batch)
        if self._recorder is not None:
            self._recorder.preloaded(start, perf_counter())
        return batch

    def _release(self) -> None:
        self._buffer.close()

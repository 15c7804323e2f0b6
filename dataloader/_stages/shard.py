"""A worker's own copy of a stream (``parallel_stream=True``), read a batch at a time."""

from __future__ import annotations

import itertools
from typing import Any

from ..errors import DataLoaderError


class ShardReader:
    """Reads ``batch_size`` samples per call from this worker's copy of the stream.

    Normally each epoch starts a fresh ``iter(dataset)`` and ``read`` returns
    None once this worker's shard is exhausted. With ``restart`` (fixed-size
    epochs), the stream carries on across epochs and starts again when it ends.
    """

    def __init__(self, dataset: Any, batch_size: int, restart: bool = False) -> None:
        self._dataset = dataset
        self._size = batch_size
        self._restart = restart
        self._epoch: int | None = None
        self._stream: Any = None

    def read(self, epoch: int) -> list | None:
        if not self._restart and epoch != self._epoch:
            self._epoch, self._stream = epoch, iter(self._dataset)
        samples = self._take()
        if not samples and self._restart:
            samples = self._take()  # the stream had just ended: read the fresh one
            if not samples:
                raise DataLoaderError(
                    "the stream yielded no sample right after being restarted; fixed-size epochs "
                    "(epoch_size) need a stream that is not empty."
                )
        return samples or None

    def _take(self) -> list:
        if self._stream is None:
            if not self._restart:
                return []
            self._stream = iter(self._dataset)
        samples = list(itertools.islice(self._stream, self._size))
        if len(samples) < self._size:
            self._stream = None  # ended: the next read ends the shard, or restarts it
        return samples

"""A worker's own copy of a stream (``parallel_stream=True``), read a batch at a time."""

from __future__ import annotations

import itertools
from typing import Any, Iterator

from .streams import batches_of, open_stream, restarting


class ShardReader:
    """Reads ``batch_size`` samples per call from this worker's copy of the stream.

    Normally each epoch starts a fresh ``iter(dataset)`` and ``read`` returns
    None once this worker's shard is exhausted. With ``restart`` (fixed-size
    epochs), the stream carries on across epochs and starts again when it ends.
    """

    def __init__(self, dataset: Any, batch_size: int, restart: bool = False) -> None:
        self._dataset = dataset
        self._size = batch_size
        self._epoch: int | None = None
        self._batches: Iterator[list] | None = None
        if restart:
            passes = itertools.count()
            self._batches = restarting(
                lambda: self._open(next(passes)),
                "the stream yielded no sample right after being restarted; fixed-size epochs "
                "(epoch_size) need a stream that is not empty.",
            )
        self._restart = restart

    def _open(self, epoch: int) -> Iterator[list]:
        return batches_of(open_stream(self._dataset, epoch), self._size)

    def read(self, epoch: int, skip: int = 0) -> list | None:
        """The next batch of this worker's shard; ``skip`` batches are read and dropped first
        (a resumed epoch: the ones this worker handed out before the state was taken)."""
        if not self._restart and epoch != self._epoch:
            self._epoch, self._batches = epoch, self._open(epoch)
        for _ in range(skip):
            next(self._batches, None)  # type: ignore[arg-type]
        return next(self._batches, None)  # type: ignore[arg-type]

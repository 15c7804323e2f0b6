"""Fixed-size epochs: exactly ``epoch_size`` batches each, carrying on where the last one stopped.

The source (a sampler's index lists, or a stream's samples grouped into
batches) lives across epochs; when it ends in the middle of an epoch it is
opened again and the epoch is completed from the fresh one.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from ..errors import DataLoaderError
from .task import BatchTask


class EpochCut:
    """Cuts an endless feed of batch payloads into epochs of ``epoch_size`` tasks."""

    def __init__(self, open_source: Callable[[], Iterable], epoch_size: int, kind: str) -> None:
        self._open = open_source
        self._size = epoch_size
        self._kind = kind  # "indices" or "samples": which BatchTask field a payload fills
        self._feed = self._endless()

    def _endless(self) -> Iterator[Any]:
        while True:
            produced = False
            for payload in self._open():
                produced = True
                yield payload
            if not produced:
                raise DataLoaderError(
                    "the dataset or sampler produced no batch; fixed-size epochs (epoch_size) need "
                    "a source that is not empty."
                )

    def tasks(self, epoch: int) -> Iterator[BatchTask]:
        """The next ``epoch_size`` tasks, numbered from 0 for this epoch."""
        for index, payload in zip(range(self._size), self._feed):
            yield BatchTask(epoch, index, **{self._kind: list(payload)})

"""A worker's own copy of a stream (``parallel_stream=True``), read a batch at a time."""

from __future__ import annotations

import itertools
from typing import Any, Iterator

from .seeding import seed_all, stream_seed
from .streams import batches_of, open_stream, restarting


class ShardReader:
    """Reads ``batch_size`` samples per call from this worker's copy of the stream (a
    :class:`~dataloader._stages.streams.BatchSize` with ``drop_last`` drops its short last batch).

    Normally each epoch starts a fresh ``iter(dataset)`` and ``read`` returns
    None once this worker's shard is exhausted. With ``restart`` (fixed-size
    epochs), the stream carries on across epochs and starts again when it ends.

    With a ``seed`` (process workers: thread workers share the process's random state), the
    globals are seeded as the stream opens and before each batch is read, from (seed, epoch,
    where the batch stands: :meth:`seed_index`): what a stream draws then follows the loader's
    seed, neither the worker's past nor the transforms run between two reads, so a resumed
    worker that skips batches draws as the saving run did.
    """

    def __init__(
        self, dataset: Any, batch_size: int, restart: bool = False, seed: int | None = None,
        worker: int = 0, workers: int = 1,
    ) -> None:
        self._dataset = dataset
        self._size = batch_size
        self._seed, self._worker, self._workers = seed, worker, workers
        self._epoch: int | None = None
        self._read = 0  # batches of this epoch's shard read so far
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
        if self._seed is not None:
            seed_all(stream_seed(self._seed, epoch, -1 - self._worker))  # what __iter__ draws
        return batches_of(open_stream(self._dataset, epoch), self._size)

    def read(self, epoch: int, skip: int = 0) -> list | None:
        """The next batch of this worker's shard; ``skip`` batches are read and dropped first
        (a resumed epoch: the ones this worker handed out before the state was taken)."""
        if epoch != self._epoch:
            self._epoch, self._read = epoch, 0
            if not self._restart:
                self._batches = self._open(epoch)
        for _ in range(skip):
            self._pull(epoch)
        return self._pull(epoch)

    def seed_index(self) -> int:
        """Where the batch ``read`` returned last stands among all shards' batches of the epoch:
        this worker's n-th batch is n * workers + worker, the index it has when the workers take
        turns, whatever the other shards' lengths or the run (a resumed one counts the batches
        it skipped)."""
        return (self._read - 1) * self._workers + self._worker

    def _pull(self, epoch: int) -> list | None:
        self._read += 1
        if self._seed is not None:
            seed_all(stream_seed(self._seed, epoch, self.seed_index()))
        return next(self._batches, None)  # type: ignore[arg-type]

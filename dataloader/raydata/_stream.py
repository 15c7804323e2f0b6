"""``RayStream``: a Ray Data ``Dataset`` or ``DataIterator`` as this loader's stream.

Ray's ``iter_batches`` (with its own prefetching) runs in the process that
iterates the stream: the loader's main process, or its stream-reader thread
when the loader has a ``timeout``. Workers never read it; they may run
per-sample transforms on the rows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Iterator

import numpy as np

from .._stages.buffering import BufferedIterator
from .._validate import (
    check_bool, check_non_negative_int, check_optional_seed, check_positive_int, check_timeout,
)
from ..columnar._batching import batch_rows
from ..dataset import Collated, StreamDataset
from ..errors import DataLoaderError, LoaderTimeoutError, RayDataError
from ..worker import get_worker_info
from ._ray import as_our_error, checked_source, is_ray_failure


@dataclass(frozen=True)
class RayStreamStats:
    """One epoch of a :class:`RayStream` as this process read it (see ``RayStream.stats``)."""

    epoch: int
    batches: int  # batches Ray's iterator handed over so far
    rows: int  # rows in them
    wait_seconds: float  # time spent blocked in Ray's iterator: waiting on the cluster


class _Progress:
    """The mutable side of :class:`RayStreamStats`."""

    def __init__(self, epoch: int) -> None:
        self.epoch, self.batches, self.rows, self.wait = epoch, 0, 0, 0.0

    def snapshot(self) -> RayStreamStats:
        return RayStreamStats(self.epoch, self.batches, self.rows, self.wait)


class RayStream(StreamDataset):
    """A Ray Data ``Dataset`` or ``DataIterator`` as a :class:`~dataloader.StreamDataset`.

    ``source`` is a ``ray.data.Dataset`` (this process reads all of it), or
    one ``DataIterator`` of ``Dataset.streaming_split(n, equal=...)`` or of
    ``ray.train.get_dataset_shard(name)`` (this rank's share). Each
    ``iter()`` is one epoch: one call of Ray's ``iter_batches``, whose
    batches arrive as NumPy arrays, ``{column: array}``.

    With ``batch_size=N`` it yields Ray's batches of ``N`` rows whole (pair it
    with ``StreamSampler()``); with ``batch_size=None`` it yields rows,
    ``{column: value}``, read from Ray ``read_batch_size`` at a time, for
    per-sample transforms in the loader's workers (pair it with
    ``StreamSampler(batch_size=N)``). ``drop_last`` and ``prefetch_batches``
    are Ray's. ``local_shuffle_buffer_size`` shuffles rows in Ray's buffer,
    seeded from ``(seed, epoch)``; ``seed=None`` leaves that shuffle unseeded.

    It is read by the main process only (``parallel_stream=True`` is an
    error) and cannot resume in the middle of an epoch. :meth:`stats` tells
    how long this process waited on the cluster.

    ``timeout`` bounds the wait for each batch from Ray (0: no bound). Ray's
    iterator does not raise when its cluster goes away (its GCS or raylet
    killed, ``ray.shutdown()`` from another thread): it blocks. So Ray is
    read in a helper thread, and a batch that does not come within
    ``timeout`` seconds is a :class:`~dataloader.errors.RayDataError`.
    """

    reads_in_main_process = True  # Ray's iterators are not copied into worker processes

    # A loader refuses to resume this stream in the middle of an epoch, even by re-reading it.
    resume_refused = (
        "RayStream cannot resume in the middle of an epoch: Ray Data's iterators have no position "
        "to restore, and re-reading the epoch does not give the same rows in the same order. Take "
        "the loader's state after an epoch ends (after the loop over it); that state resumes at "
        "the next epoch's start."
    )

    def __init__(
        self, source: Any, *, batch_size: int | None = None, read_batch_size: int = 256,
        prefetch_batches: int = 1, drop_last: bool = False, local_shuffle_buffer_size: int | None = None,
        seed: int | None = 0, timeout: float = 300.0,
    ) -> None:
        self._source = checked_source(source)
        self.timeout = check_timeout("timeout", timeout)
        self.batch_size = None if batch_size is None else check_positive_int("batch_size", batch_size)
        self.yields_batches = batch_size is not None  # each item is then a Collated batch
        self.read_batch_size = check_positive_int("read_batch_size", read_batch_size)
        self.prefetch_batches = check_non_negative_int("prefetch_batches", prefetch_batches)
        self.drop_last = check_bool("drop_last", drop_last)
        self.local_shuffle_buffer_size = (
            None if local_shuffle_buffer_size is None
            else check_positive_int("local_shuffle_buffer_size", local_shuffle_buffer_size)
        )
        self.seed = check_optional_seed("seed", seed)
        self._epoch: int | None = None  # set by set_epoch; None: count iter() calls
        self._iterations = 0
        self._progress = _Progress(0)

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` at the next ``iter()`` (the loader calls this each epoch)."""
        self._epoch = check_non_negative_int("epoch", epoch)

    def stats(self) -> RayStreamStats:
        """The current (or last) epoch: batches and rows received, seconds spent waiting on Ray."""
        return self._progress.snapshot()

    def __iter__(self) -> Iterator[Any]:
        if self._source is None or get_worker_info() is not None:
            raise DataLoaderError(
                "RayStream is read by the main process only, not by a copy in a worker process. "
                "Drop parallel_stream=True, and read the stream where it was built."
            )
        epoch = self._epoch
        if epoch is None:
            epoch, self._iterations = self._iterations, self._iterations + 1
        self._progress = _Progress(epoch)
        return self._read(self._progress)

    def _read(self, progress: _Progress) -> Iterator[Any]:
        batches = iter(self._source.iter_batches(**self._iter_options(progress.epoch)))
        bounded = self._bounded(batches) if self.timeout else None
        try:
            for batch in self._timed(bounded or batches, progress):
                size = len(next(iter(batch.values()))) if batch else 0
                progress.batches, progress.rows = progress.batches + 1, progress.rows + size
                if self.batch_size is None:
                    yield from batch_rows(batch)
                else:
                    yield Collated(batch, size, rows=functools.partial(batch_rows, batch))
        finally:
            if bounded is not None:
                bounded.close()
            close = getattr(batches, "close", None)
            # A reader thread still blocked inside Ray's generator keeps it (it cannot be closed
            # while it runs); it ends when Ray hands over its next batch.
            if close is not None and not getattr(batches, "gi_running", False):
                close()  # stops Ray's prefetching for this epoch

    def _bounded(self, batches: Iterator[dict]) -> BufferedIterator:
        """Ray's batches read in a helper thread, so waiting for one can give up."""
        return BufferedIterator(
            batches, buffer_size=1, timeout=self.timeout, name="dataloader-ray-reader",
            timeout_message=(
                f"Ray Data produced no batch within {self.timeout:g} s (RayStream's timeout). "
                "The Ray cluster may be gone (Ray's iterator blocks rather than raises when it "
                "is) or the pipeline stalled: check the cluster, or raise RayStream(timeout=...)."
            ),
        )

    def _timed(self, batches: Iterator[dict], progress: _Progress) -> Iterator[dict]:
        """Ray's batches, the time blocked on each counted as waiting, Ray's failures as ours."""
        while True:
            start = perf_counter()
            try:
                batch = next(batches)
            except StopIteration:
                return
            except LoaderTimeoutError as error:
                raise RayDataError(str(error)) from None
            except Exception as error:
                if is_ray_failure(error):
                    raise as_our_error(error, progress.epoch, progress.batches) from error
                raise
            finally:
                progress.wait += perf_counter() - start
            yield batch

    def _iter_options(self, epoch: int) -> dict:
        options = dict(
            batch_size=self.batch_size or self.read_batch_size, batch_format="numpy",
            prefetch_batches=self.prefetch_batches, drop_last=self.drop_last,
        )
        if self.local_shuffle_buffer_size is not None:
            options["local_shuffle_buffer_size"] = self.local_shuffle_buffer_size
            if self.seed is not None:
                seed = np.random.SeedSequence([self.seed, epoch]).generate_state(1)[0]
                options["local_shuffle_seed"] = int(seed)
        return options

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_source"] = None  # Ray's iterator stays with the process that reads it
        return state

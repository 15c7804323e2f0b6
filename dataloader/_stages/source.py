"""Sources: where an epoch's tasks come from (always the main process).

Map and stream datasets differ only here: a map source turns the sampler's
index lists into tasks; a stream source reads raw samples from the stream and
groups them into batches, keeping the final short one.
"""

from __future__ import annotations

from typing import Any, Iterator

from ..buffer import BufferedIterator
from .task import BatchTask


def map_tasks(sampler: Any, epoch: int) -> Iterator[BatchTask]:
    """One task per index list the sampler yields."""
    for index, indices in enumerate(sampler):
        yield BatchTask(epoch, index, indices=list(indices))


def stream_tasks(stream: Iterator[Any], batch_size: int, epoch: int) -> Iterator[BatchTask]:
    """Group a stream into tasks of ``batch_size`` raw samples; the last may be shorter."""
    index = 0
    while True:
        samples = []
        for sample in stream:
            samples.append(sample)
            if len(samples) == batch_size:
                break
        if not samples:
            return
        yield BatchTask(epoch, index, samples=samples)
        index += 1
        if len(samples) < batch_size:
            return


def timed_stream(stream: Iterator[Any], timeout: float) -> BufferedIterator:
    """Iterate ``stream`` in a helper thread so ``next()`` can give up after ``timeout`` s.

    The main thread is never interrupted: it waits with a bound and raises
    :class:`~dataloader.LoaderTimeoutError` when nothing came. ``close()``
    stops the thread at its next sample (a stream blocked forever inside
    ``next()`` keeps a daemon thread until the process exits: Python cannot
    interrupt it).
    """
    return BufferedIterator(
        stream,
        buffer_size=64,
        timeout=timeout,
        name="dataloader-stream-reader",
        timeout_message=(
            f"DataLoader timeout: the stream produced no sample within {timeout:g} s. "
            "The dataset's __iter__ is blocked or very slow; raise `timeout` or check the "
            "stream's source."
        ),
    )

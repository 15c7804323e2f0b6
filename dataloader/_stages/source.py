"""Sources: where an epoch's tasks come from (always the main process).

Map and stream datasets differ only here: a map source turns the sampler's
index lists into tasks; a stream source reads raw samples from the stream and
groups them into batches, keeping the final short one.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Iterator

from ..errors import LoaderTimeoutError
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


_END = object()


class TimedStream:
    """Iterates ``stream`` in a helper thread so ``next()`` can give up after ``timeout`` s.

    The main thread is never interrupted: it waits on a queue with a bound and
    raises :class:`LoaderTimeoutError` when nothing came. ``close()`` stops the
    thread at its next sample (a stream blocked forever inside ``next()`` keeps a
    daemon thread until the process exits: Python cannot interrupt it).
    """

    def __init__(self, stream: Iterator[Any], timeout: float, depth: int = 64) -> None:
        self._timeout = timeout
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._read, args=(stream,), name="dataloader-stream-reader", daemon=True
        )
        self._thread.start()

    def _read(self, stream: Iterator[Any]) -> None:
        try:
            for sample in stream:
                if not self._put((True, sample)):
                    return
            self._put((True, _END))
        except BaseException as error:  # handed to the consumer, which re-raises it
            self._put((False, error))

    def _put(self, item: tuple) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> "TimedStream":
        return self

    def __next__(self) -> Any:
        try:
            ok, value = self._queue.get(timeout=self._timeout)
        except queue.Empty:
            raise LoaderTimeoutError(
                f"DataLoader timeout: the stream produced no sample within {self._timeout:g} s. "
                "The dataset's __iter__ is blocked or very slow; raise `timeout` or check the "
                "stream's source."
            ) from None
        if not ok:
            raise value
        if value is _END:
            self._queue.put((True, _END))  # later calls keep ending
            raise StopIteration
        return value

    def close(self) -> None:
        """Stop the reader thread (joined when it is not stuck inside the stream)."""
        self._stop.set()
        self._thread.join(timeout=1.0)

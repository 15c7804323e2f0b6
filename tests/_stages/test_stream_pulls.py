"""A stream is pulled with ``next()`` from the one iterator its ``__iter__`` returned: never
``iter()`` again, so a stream that is its own iterator and resets itself in ``__iter__`` is
read once through, not restarted at every batch."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

from dataloader import DataLoader, StreamDataset, get_worker_info
from dataloader._stages.shard import ShardReader
from dataloader._stages.streams import batches_of, marked, open_stream, timed_stream


class SelfIterating(StreamDataset):
    """Its own iterator: ``__iter__`` resets the position (and counts how often it is called);
    in a worker it reads every ``num_workers``-th sample from the worker's id on."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.i = 0
        self.step = 1
        self.opened = 0

    def __iter__(self) -> "SelfIterating":
        info = get_worker_info()
        self.i, self.step = (0, 1) if info is None else (info.id, info.num_workers)
        self.opened += 1
        return self

    def __next__(self) -> int:
        if self.i >= self.n:
            raise StopIteration
        self.i += self.step
        return self.i - self.step

    def state_dict(self) -> dict:
        return {"i": self.i}


def _values(batches: list) -> list[int]:
    return [int(v) for batch in batches for v in batch]


def test_batches_of_never_calls_iter_again():
    stream = SelfIterating(10)
    batches = list(itertools.islice(batches_of(open_stream(stream, 0), 3), 20))
    assert [len(b) for b in batches] == [3, 3, 3, 1] and _values(batches) == list(range(10))
    assert stream.opened == 1


class Arrays:
    """Its own iterator, of NumPy arrays (which refuse to be compared with a sentinel)."""

    def __init__(self, n: int) -> None:
        self.n, self.i = n, 0

    def __iter__(self) -> "Arrays":
        self.i = 0
        return self

    def __next__(self) -> np.ndarray:
        self.i += 1
        if self.i > self.n:
            raise StopIteration
        return np.full(2, self.i - 1)


def test_samples_are_never_compared_with_anything():
    batches = list(itertools.islice(batches_of(open_stream(Arrays(5), 0), 2), 10))
    assert [[int(a[0]) for a in batch] for batch in batches] == [[0, 1], [2, 3], [4]]


def test_marked_never_calls_iter_again():
    stream = SelfIterating(10)
    items = list(itertools.islice(marked(open_stream(stream, 0), 3, stream.state_dict), 40))
    assert [item for item in items if isinstance(item, int)] == list(range(10))
    assert stream.opened == 1


def test_timed_stream_never_calls_iter_again():
    stream = SelfIterating(10)
    timed = timed_stream(open_stream(stream, 0), timeout=5)
    try:
        assert list(itertools.islice(timed, 20)) == list(range(10))
    finally:
        timed.close()
    assert stream.opened == 1


def test_a_shard_reader_never_calls_iter_again():
    stream = SelfIterating(10)
    reader = ShardReader(stream, 3)
    batches = [reader.read(0) for _ in range(5)]
    assert batches[-1] is None and _values(batches[:-1]) == list(range(10))
    assert stream.opened == 1


@pytest.mark.parametrize("settings", [
    {},
    {"timeout": 5},
    {"num_workers": 2},
    {"num_workers": 2, "timeout": 5},
    {"num_workers": 2, "parallel_stream": True},
], ids=["serial", "reader-thread", "workers", "workers-reader-thread", "parallel-stream"])
def test_a_self_iterating_stream_is_read_once_through(no_leaks, settings):
    loader = DataLoader(SelfIterating(10), batch_size=3, multiprocessing_context="fork", **settings)
    for epoch in range(2):  # two epochs: __iter__ resets it for the next one
        batches = list(itertools.islice(loader, 20))  # bounded: a regression fails, not hangs
        values = _values([batch.tolist() for batch in batches])
        assert collections.Counter(values) == collections.Counter(range(10))
        sizes = [3, 2, 3, 2] if settings.get("parallel_stream") else [3, 3, 3, 1]  # 5 a worker
        assert sorted(len(batch) for batch in batches) == sorted(sizes)
        if not settings.get("parallel_stream"):  # read here: __iter__ once an epoch
            assert loader.dataset.opened == epoch + 1

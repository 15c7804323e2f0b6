"""``drop_last=True`` on a stream, as PyTorch has it: the short last batch is dropped (each
worker's, when each worker reads its own shard with ``parallel_stream=True``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dataloader import Collated, DataLoader, StreamDataset, StreamSampler, get_worker_info
from dataloader.errors import ArgumentTypeError, ArgumentValueError


class Numbers(StreamDataset):
    """0 .. n-1; in a worker, every ``num_workers``-th from the worker's id on."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


class Positioned(Numbers):
    """:class:`Numbers` read in the main process that says where it stands (``state_dict``)."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.at = self.start = 0

    def __iter__(self):
        self.at, self.start = self.start, 0
        for value in range(self.at, self.n):
            self.at = value + 1
            yield value

    def state_dict(self) -> dict:
        return {"at": self.at}

    def load_state_dict(self, state: dict) -> None:
        self.start = state["at"]


class Chunks(StreamDataset):
    """Whole batches of ``batch_size`` (the last one short) of 0 .. n-1, made by the stream."""

    yields_batches = True

    def __init__(self, n: int, batch_size: int | None) -> None:
        self.n, self.batch_size = n, batch_size

    def __iter__(self):
        info = get_worker_info()
        shard = range(self.n) if info is None else range(info.id, self.n, info.num_workers)
        step = self.batch_size or 1
        for start in range(0, len(shard), step):
            values = np.asarray(shard[start : start + step])
            yield Collated(values, len(values))


def batches(loader) -> list[list[int]]:
    return [batch.tolist() for batch in itertools.islice(loader, 50)]


@pytest.mark.parametrize("settings", [
    {}, {"timeout": 5}, {"num_workers": 2}, {"num_workers": 2, "timeout": 5},
], ids=["serial", "reader-thread", "workers", "workers-reader-thread"])
@pytest.mark.parametrize("stream", [Numbers, Positioned])
def test_the_short_last_batch_is_dropped(no_leaks, settings, stream):
    loader = DataLoader(stream(10), batch_size=4, drop_last=True, multiprocessing_context="fork", **settings)
    assert loader.drop_last and loader.sampler.drop_last
    for _ in range(2):
        assert batches(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize("taken", [1, 2])
def test_a_resume_drops_the_short_last_batch_too(taken):
    loader = DataLoader(Positioned(10), batch_size=4, drop_last=True)
    iterator = iter(loader)
    for _ in range(taken):
        next(iterator)
    state = loader.state_dict()
    iterator.close()
    resumed = DataLoader(Positioned(10), batch_size=4, drop_last=True)
    resumed.load_state_dict(state)
    assert batches(resumed) == [[0, 1, 2, 3], [4, 5, 6, 7]][taken:]


def test_a_whole_stream_of_full_batches_loses_nothing():
    assert batches(DataLoader(Numbers(8), StreamSampler(batch_size=4, drop_last=True))) == [
        [0, 1, 2, 3], [4, 5, 6, 7]]
    assert batches(DataLoader(Numbers(3), StreamSampler(batch_size=4, drop_last=True))) == []


def test_each_workers_short_last_batch_is_dropped(no_leaks, start_method):
    loader = DataLoader(Numbers(10), batch_size=2, drop_last=True, num_workers=2, parallel_stream=True,
                        multiprocessing_context=start_method)
    got = batches(loader)  # worker 0 reads 0 2 4 6 8, worker 1 reads 1 3 5 7 9: 8 and 9 are dropped
    assert sorted(got) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    kept = DataLoader(Numbers(10), batch_size=2, num_workers=2, parallel_stream=True,
                      multiprocessing_context=start_method)
    assert sorted(batches(kept)) == [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]


def test_fixed_size_epochs_drop_each_pass_short_batch():
    loader = DataLoader(Numbers(10), batch_size=4, drop_last=True, epoch_size=3)
    assert batches(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3]]
    assert batches(loader) == [[4, 5, 6, 7], [0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize("settings", [
    {}, {"timeout": 5}, {"num_workers": 2}, {"num_workers": 2, "parallel_stream": True},
], ids=["serial", "reader-thread", "workers", "parallel-stream"])
def test_a_stream_of_whole_batches_drops_a_short_one(no_leaks, settings):
    loader = DataLoader(Chunks(10, 4), StreamSampler(drop_last=True), multiprocessing_context="fork", **settings)
    if settings.get("parallel_stream"):  # each worker's 5 samples: 4 kept, 1 dropped
        assert sorted(batches(loader)) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    else:
        assert batches(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_a_stream_of_whole_batches_without_a_batch_size_refuses_drop_last():
    with pytest.raises(ArgumentValueError, match=r"Chunks yields whole batches but has no batch_size"):
        DataLoader(Chunks(10, None), StreamSampler(drop_last=True))


def test_a_stream_still_refuses_shuffle():
    with pytest.raises(ArgumentValueError, match=r"shuffle=True: a stream has no order to shuffle"):
        DataLoader(Numbers(10), batch_size=4, shuffle=True, drop_last=True)


def test_drop_last_must_be_a_bool():
    with pytest.raises(ArgumentTypeError, match=r"`drop_last` must be"):
        StreamSampler(batch_size=4, drop_last=1)
    assert StreamSampler(4).drop_last is False

"""Fixed-size epochs, buffered mode, callable sources and data echoing, in every mode."""

import threading
import time

import numpy as np
import pytest

from dataloader import (
    ArrayDataset,
    CallableSource,
    DataLoader,
    Infinite,
    SequentialSampler,
    StreamSampler,
)
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from tests._fixtures_stream import Counted, Jobs, Samples

MODES = [
    pytest.param({}, id="serial"),
    pytest.param({"num_workers": 2}, id="process"),
    pytest.param({"num_workers": 2, "worker_type": "thread"}, id="thread"),
]


def values(loader):
    return [batch.tolist() for batch in loader]


# -- fixed-size epochs ------------------------------------------------------


@pytest.mark.parametrize("options", MODES)
def test_epoch_size_continues_the_stream_and_restarts_it_mid_epoch(options, no_leaks):
    loader = DataLoader(Counted(10), StreamSampler(batch_size=4), epoch_size=2, **options)
    assert len(loader) == 2
    epochs = [values(loader) for _ in range(3)]
    assert epochs == [
        [[0, 1, 2, 3], [4, 5, 6, 7]],
        [[8, 9], [0, 1, 2, 3]],  # the stream ended mid-epoch: restarted, the epoch completed
        [[4, 5, 6, 7], [8, 9]],
    ]
    loader.close()


@pytest.mark.parametrize("worker_type", ["process", "thread"])
def test_epoch_size_with_parallel_streams_keeps_each_workers_stream(worker_type, no_leaks):
    loader = DataLoader(Counted(12), StreamSampler(batch_size=3), num_workers=2, worker_type=worker_type,
                        parallel_stream=True, epoch_size=3)
    seen = [sample for _ in range(4) for batch in values(loader) for sample in batch]
    assert len(seen) == 4 * 3 * 3  # every epoch exactly 3 full batches (each shard has 6 samples)
    evens, odds = [s for s in seen if s % 2 == 0], [s for s in seen if s % 2]
    # each worker walks its own shard in order and starts it again when it ends
    assert evens == ([0, 2, 4, 6, 8, 10] * 4)[: len(evens)]
    assert odds == ([1, 3, 5, 7, 9, 11] * 4)[: len(odds)]
    loader.close()


@pytest.mark.parametrize("options", MODES)
def test_epoch_size_over_a_map_sampler_carries_across_sampler_epochs(options, no_leaks):
    dataset = ArrayDataset(np.arange(5))
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), epoch_size=4, **options)
    assert [[b[0].tolist() for b in loader] for _ in range(2)] == [
        [[0, 1], [2, 3], [4], [0, 1]],
        [[2, 3], [4], [0, 1], [2, 3]],
    ]


def test_epoch_size_over_an_infinite_sampler():
    dataset = ArrayDataset(np.arange(3))
    loader = DataLoader(dataset, Infinite(SequentialSampler(dataset, batch_size=2)), epoch_size=3)
    assert [[b[0].tolist() for b in loader] for _ in range(2)] == [[[0, 1], [2], [0, 1]], [[2], [0, 1], [2]]]


def test_epoch_size_must_be_positive():
    with pytest.raises(ArgumentValueError, match="`epoch_size`"):
        DataLoader(ArrayDataset(np.arange(3)), epoch_size=0)


# -- buffered mode ----------------------------------------------------------


class Tracked:
    """A map dataset that records how many samples were read."""

    def __init__(self):
        self.reads = 0

    def __len__(self):
        return 40

    def __getitem__(self, index):
        self.reads += 1
        return np.int64(index)


def wait_until(condition, seconds=2.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def test_buffered_mode_works_ahead():
    dataset = Tracked()
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=1), buffer_size=3)
    iterator = iter(loader)
    assert next(iterator).tolist() == [0]
    assert wait_until(lambda: dataset.reads >= 4)  # one handed out, three buffered
    time.sleep(0.05)
    assert dataset.reads <= 5
    assert [b.tolist()[0] for b in iterator] == list(range(1, 40))


def test_buffer_on_request_grows_only_inside_allow_buffering():
    dataset = Tracked()
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=1), buffer_size=3, buffer_on_request=True)
    iterator = iter(loader)
    assert next(iterator).tolist() == [0]
    time.sleep(0.1)
    assert dataset.reads == 1  # outside the block: only what was asked for
    with loader.allow_buffering():
        assert wait_until(lambda: dataset.reads == 4)
    time.sleep(0.05)
    assert dataset.reads == 4
    assert [next(iterator).tolist()[0] for _ in range(4)] == [1, 2, 3, 4]
    assert dataset.reads == 5
    iterator.close()
    assert not any(t.name == "dataloader-buffer" for t in threading.enumerate())


def test_buffer_on_request_needs_a_buffer():
    with pytest.raises(ArgumentValueError, match="buffer_size"):
        DataLoader(ArrayDataset(np.arange(3)), buffer_on_request=True)


# -- callable sources -------------------------------------------------------


@pytest.mark.parametrize("options", MODES)
def test_chunked_jobs_are_reassembled_in_job_order(options, no_leaks):
    source = CallableSource(Jobs(), chunk_size=2)
    loader = DataLoader(source, StreamSampler(batch_size=6), epoch_size=3, **options)
    assert values(loader) == [[100 * k + i for i in range(6)] for k in (1, 2, 3)]
    loader.close()


def test_chunks_finishing_out_of_order_still_reassemble(no_leaks):
    # Early jobs are slowest, so later chunks finish first; in_order=False hands them out as they come.
    source = CallableSource(Jobs(), chunk_size=1)
    loader = DataLoader(source, StreamSampler(batch_size=4), num_workers=2, in_order=False, epoch_size=4)
    batches = values(loader)
    assert sorted(batches) == [[100 * k + i for i in range(4)] for k in (1, 2, 3, 4)]


@pytest.mark.parametrize("options", MODES)
def test_ready_samples_are_collated_directly(options, no_leaks):
    loader = DataLoader(CallableSource(Samples()), StreamSampler(batch_size=3), epoch_size=2, **options)
    batches = list(loader)
    assert [b["x"].tolist() for b in batches] == [[1.0] * 3, [2.0] * 3]
    assert batches[0]["i"].tolist() == [0, 1, 2]


def test_callable_source_is_endless_until_closed(no_leaks):
    loader = DataLoader(CallableSource(Samples()), StreamSampler(batch_size=2), num_workers=2)
    iterator = iter(loader)
    assert [next(iterator)["x"][0] for _ in range(5)] == [1, 2, 3, 4, 5]
    iterator.close()
    with pytest.raises(TypeError, match="undefined"):
        len(loader)


def test_chunk_size_must_divide_the_batch_size():
    with pytest.raises(ArgumentValueError, match="`chunk_size` must divide"):
        DataLoader(CallableSource(Jobs(), chunk_size=4), StreamSampler(batch_size=6))
    with pytest.raises(ArgumentTypeError, match="`data_source`"):
        CallableSource(3)


# -- data echoing -----------------------------------------------------------


@pytest.mark.parametrize("options", MODES + [pytest.param({"num_workers": 2, "preload": True}, id="preload")])
def test_repeats_echo_the_same_object(options, no_leaks):
    dataset = ArrayDataset(np.arange(6))
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), repeats=3, **options)
    assert len(loader) == 9
    batches = list(loader)
    assert [b[0].tolist() for b in batches] == [[0, 1]] * 3 + [[2, 3]] * 3 + [[4, 5]] * 3
    assert batches[0] is batches[1] is batches[2] and batches[2] is not batches[3]


def test_serial_echo_makes_the_next_batch_in_the_background():
    dataset = Tracked()
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=1), repeats=4)
    iterator = iter(loader)
    next(iterator)
    assert wait_until(lambda: dataset.reads >= 2)  # batch 1 is made while batch 0 is echoed
    iterator.close()

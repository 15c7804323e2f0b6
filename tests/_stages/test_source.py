import itertools
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import (
    ArrayDataset,
    CallableSource,
    Collated,
    RandomSampler,
    SequentialSampler,
    StreamDataset,
    StreamSampler,
)
from dataloader._options import LoaderOptions
from dataloader._stages.consumer import Reassemble
from dataloader._stages.shard import ShardReader
from dataloader._stages.streams import batches_of, restarting, timed_stream
from dataloader._stages.build import build_source
from dataloader._stages.fixed_epochs import FixedEpochs
from dataloader._stages.map_source import MapSource
from dataloader._stages.stream_sources import CallableTasks, StreamSource, WorkerStreamSource
from dataloader._stages.kinds import checked_sampler
from dataloader._stages.task import listed
from dataloader.errors import ArgumentTypeError, ArgumentValueError, DataLoaderError, LoaderTimeoutError


def test_map_source_numbers_batches_and_copies_indices():
    tasks = list(MapSource([[3, 1], [2]]).tasks(epoch=4))
    assert [(t.epoch, t.index, t.indices, t.samples) for t in tasks] == [(4, 0, [3, 1], None), (4, 1, [2], None)]


def test_map_source_hands_our_samplers_batches_on_as_int64_arrays():
    data = ArrayDataset(list(range(7)))
    tasks = list(MapSource(SequentialSampler(data, batch_size=3)).tasks(epoch=0))
    assert all(type(t.indices) is np.ndarray and t.indices.dtype == np.int64 for t in tasks)
    assert [listed(t.indices) for t in tasks] == [[0, 1, 2], [3, 4, 5], [6]]
    assert all(type(i) is int for t in tasks for i in listed(t.indices))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 50), batch_size=st.integers(1, 9))
def test_stream_source_groups_everything_once_keeping_the_short_tail(n, batch_size):
    tasks = list(StreamSource(range(n), batch_size).tasks(epoch=0))
    assert [s for t in tasks for s in t.samples] == list(range(n))
    assert all(len(t.samples) == batch_size for t in tasks[:-1])
    assert [t.index for t in tasks] == list(range(len(tasks)))


def test_batches_of_stops_reading_after_a_short_batch():
    reads = []

    def stream():
        for i in range(3):
            reads.append(i)
            yield i

    assert len(list(batches_of(stream(), 2))) == 2
    assert reads == [0, 1, 2]


def test_timed_stream_passes_samples_then_ends_repeatedly():
    timed = timed_stream(iter([1, 2]), timeout=5)
    assert list(timed) == [1, 2]
    with pytest.raises(StopIteration):
        next(timed)
    timed.close()


def test_timed_stream_times_out_and_closes():
    gate = threading.Event()

    def stuck():
        yield 1
        gate.wait(10)

    timed = timed_stream(stuck(), timeout=0.2)
    assert next(timed) == 1
    with pytest.raises(LoaderTimeoutError, match="DataLoader timed out after 0.2 seconds: the stream produced no sample"):
        next(timed)
    gate.set()
    timed.close()
    assert not timed._thread.is_alive()


def test_timed_stream_reraises_the_streams_error():
    def broken():
        yield 1
        raise ValueError("boom")

    timed = timed_stream(broken(), timeout=5)
    assert next(timed) == 1
    with pytest.raises(ValueError, match="boom"):
        next(timed)
    timed.close()


# -- the source contract and the factory ------------------------------------------------------


class Count(StreamDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


def _payloads(tasks):
    return [listed(t.indices) if t.indices is not None else t.samples for t in tasks]


def test_build_source_picks_one_kind_per_dataset_and_options():
    data = ArrayDataset(list(range(10)))
    kinds = {
        "map": (data, SequentialSampler(data, batch_size=2), LoaderOptions()),
        "stream": (Count(5), StreamSampler(2), LoaderOptions()),
        "stream, no workers": (Count(5), StreamSampler(2), LoaderOptions(parallel_stream=True)),
        "worker streams": (Count(5), StreamSampler(2), LoaderOptions(num_workers=2, parallel_stream=True)),
        "callable": (CallableSource(lambda n: list(range(n))), StreamSampler(2), LoaderOptions()),
        "fixed": (data, SequentialSampler(data, batch_size=2), LoaderOptions(epoch_size=3)),
    }
    built = {name: type(build_source(*args)).__name__ for name, args in kinds.items()}
    assert built == {
        "map": "MapSource",
        "stream": "StreamSource",
        "stream, no workers": "StreamSource",
        "worker streams": "WorkerStreamSource",
        "callable": "CallableTasks",
        "fixed": "FixedEpochs",
    }


class MainProcessOnly(Count):
    reads_in_main_process = True  # a service's client, as RayStream is


def test_a_stream_read_in_the_main_process_only_refuses_parallel_stream():
    with pytest.raises(ArgumentValueError, match="MainProcessOnly is read by the main process only"):
        build_source(MainProcessOnly(5), StreamSampler(2), LoaderOptions(num_workers=2, parallel_stream=True))
    options = LoaderOptions(num_workers=2)
    assert type(build_source(MainProcessOnly(5), StreamSampler(2), options)).__name__ == "StreamSource"


def test_build_source_rejects_a_callable_source_read_by_workers_and_a_bad_chunk_size():
    with pytest.raises(ArgumentValueError, match="parallel_stream"):
        build_source(CallableSource(lambda n: []), StreamSampler(2), LoaderOptions(num_workers=1, parallel_stream=True))
    with pytest.raises(ArgumentValueError, match="chunk_size"):
        build_source(CallableSource(lambda n: [], chunk_size=3), StreamSampler(4), LoaderOptions())


def test_checked_sampler_pairs_dataset_and_sampler_kinds():
    data = ArrayDataset(list(range(4)))
    assert isinstance(checked_sampler(data, None), SequentialSampler)
    assert checked_sampler(Count(3), None).batch_size == 1
    with pytest.raises(ArgumentTypeError, match="needs a StreamSampler"):
        checked_sampler(Count(3), SequentialSampler(data))
    with pytest.raises(ArgumentTypeError, match="needs a map sampler"):
        checked_sampler(data, StreamSampler(2))
    with pytest.raises(ArgumentTypeError, match="must be a Dataset"):
        checked_sampler(object(), None)


def test_fixed_epochs_carry_a_map_source_over_and_restart_it():
    data = ArrayDataset(list(range(5)))
    source = FixedEpochs(build_source(data, SequentialSampler(data, batch_size=2), LoaderOptions()), 2)
    epochs = [list(source.tasks(epoch)) for epoch in range(3)]
    assert [_payloads(tasks) for tasks in epochs] == [[[0, 1], [2, 3]], [[4], [0, 1]], [[2, 3], [4]]]
    assert [[(t.epoch, t.index) for t in tasks] for tasks in epochs] == [[(e, 0), (e, 1)] for e in range(3)]
    assert source.length() == 2


def test_fixed_epochs_keep_a_streams_short_batch_and_reopen_it():
    source = FixedEpochs(build_source(Count(3), StreamSampler(2), LoaderOptions()), 3)
    assert _payloads(source.tasks(0)) == [[0, 1], [2], [0, 1]]
    assert _payloads(source.tasks(1)) == [[2], [0, 1], [2]]


def test_fixed_epochs_count_a_batch_split_into_chunks_once():
    jobs = CallableSource(lambda n: [lambda: 0] * n, chunk_size=2)
    source = FixedEpochs(CallableTasks(jobs, 6), 2)
    tasks = list(source.tasks(0))
    assert [t.chunk for t in tasks] == [(0, 3, 0, 0), (0, 3, 1, 2), (0, 3, 2, 4), (1, 3, 0, 0), (1, 3, 1, 2), (1, 3, 2, 4)]
    assert isinstance(source.consumer_stages(iter(()), None), Reassemble)


def test_fixed_epochs_over_an_empty_source_is_a_clear_error():
    source = FixedEpochs(build_source(Count(0), StreamSampler(2), LoaderOptions()), 2)
    with pytest.raises(DataLoaderError, match="produced no batch"):
        list(source.tasks(0))


def test_fixed_epochs_over_worker_streams_ask_workers_to_keep_their_streams():
    inner = WorkerStreamSource(Count(4), 2, 3)
    assert (inner.worker_batch_size, inner.worker_restart, inner.stream_workers) == (2, False, 3)
    fixed = FixedEpochs(inner, 3)
    assert (fixed.worker_batch_size, fixed.worker_restart, fixed.stream_workers) == (2, True, 3)
    assert [(t.epoch, t.index, t.samples) for t in fixed.tasks(5)] == [(5, i, None) for i in range(3)]


def test_closing_a_stream_sources_tasks_stops_its_reader_thread():
    tasks = build_source(Count(10**6), StreamSampler(4), LoaderOptions(timeout=5)).tasks(0)
    assert next(tasks).samples == [0, 1, 2, 3]
    readers = [t for t in threading.enumerate() if t.name == "dataloader-stream-reader"]
    assert readers
    tasks.close()
    assert not any(t.is_alive() for t in readers)


def test_restarting_reopens_until_a_fresh_pass_is_empty():
    passes = iter([[1, 2], [3], []])
    got = restarting(lambda: next(passes), "empty!")
    assert list(itertools.islice(got, 3)) == [1, 2, 3]
    with pytest.raises(DataLoaderError, match="empty!"):
        next(got)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), batch_size=st.integers(1, 7), epochs=st.integers(1, 4))
def test_a_restarting_shard_reads_what_fixed_epochs_over_the_same_stream_read(n, batch_size, epochs):
    """The worker side and the main-process side restart a stream the same way."""
    shard = ShardReader(Count(n), batch_size, restart=True)
    fixed = FixedEpochs(build_source(Count(n), StreamSampler(batch_size), LoaderOptions()), 3)
    main_side = [s for epoch in range(epochs) for s in _payloads(fixed.tasks(epoch))]
    assert [shard.read(epoch) for epoch in range(epochs) for _ in range(3)] == main_side


class EpochAware(StreamDataset):
    """A stream whose contents depend on the epoch the loader tells it."""

    def __init__(self):
        self.epochs = []

    def set_epoch(self, epoch):
        self.epochs.append(epoch)

    def __iter__(self):
        return iter([self.epochs[-1]] * 2)


def test_a_stream_with_set_epoch_is_told_each_epoch_and_each_fresh_pass():
    stream = EpochAware()
    source = build_source(stream, StreamSampler(2), LoaderOptions())
    assert [_payloads(source.tasks(e)) for e in (3, 4)] == [[[3, 3]], [[4, 4]]]
    fixed = FixedEpochs(build_source(EpochAware(), StreamSampler(2), LoaderOptions()), 3)
    assert _payloads(fixed.tasks(0)) == [[0, 0], [1, 1], [2, 2]]
    shard = ShardReader(EpochAware(), 2)
    assert [shard.read(7), shard.read(7), shard.read(8)] == [[7, 7], None, [8, 8]]


class Batched(StreamDataset):
    yields_batches = True
    batch_size = 3

    def __iter__(self):
        return iter([Collated(np.arange(3), 3), Collated(np.arange(3, 5), 2)])


def test_a_stream_that_yields_batches_makes_one_task_per_batch():
    source = build_source(Batched(), StreamSampler(), LoaderOptions())
    tasks = list(source.tasks(0))
    assert [len(t.samples) for t in tasks] == [1, 1]
    assert build_source(Batched(), StreamSampler(3), LoaderOptions()).tasks(0)
    with pytest.raises(ArgumentValueError, match="yields whole batches of its own batch_size"):
        build_source(Batched(), StreamSampler(4), LoaderOptions())
